package strace

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/lockstep-sandbox/lockstep/landlock"
)

// SyntaxError is a line that fits none of strace's forms.
type SyntaxError struct {
	Line int
	Text string
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("strace line %d: %s: %.80q", e.Line, e.Msg, e.Text)
}

// Stats counts what a parse met besides calls.
type Stats struct {
	// Lines is the number of lines read, Calls the number of events
	// returned.
	Lines, Calls int
	// Errors is the number of lines that did not parse.
	Errors int
	// Orphans is the number of `<... resumed>` halves with no
	// `<unfinished ...>` half before them (dropped), Unfinished the number
	// of calls that never resumed (returned with Unfinished set).
	Orphans, Unfinished int
	// Messages is the number of strace's own lines skipped ("strace: …",
	// "[ Process PID=… runs in … mode. ]").
	Messages int
	// Unplaced is the number of threads that appeared without a visible
	// creator (counted outside every domain), Reused the number of pids a
	// clone returned twice. Inferred counts threads placed as the child of a
	// clone that returned no pid (`= ? <unavailable>`: the creating process
	// died meanwhile), the next thread without a creator.
	Unplaced, Reused, Inferred int
}

// pending is the first half of a call waiting for its resumption.
type pending struct {
	call *Call
	text string // the text after the name's '(' so far
	slot int    // reserved queue slot (clone family only), or -1
}

// entry is one queued event; a clone family call reserves its entry at its
// first half and fills it at its second.
type entry struct {
	call  *Call
	ready bool
}

// thread is the domain state of one thread.
type thread struct {
	depth int
	tgid  int
}

// Parser reads strace output line by line. Use [NewParser], then call
// [Parser.Next] until io.EOF, or range over [Parser.All].
type Parser struct {
	r       io.Reader
	data    string
	pos     int
	eof     bool
	readErr error
	line    int

	pend    map[int]*pending
	queue   []entry
	head    int
	calls   []Call // slab the calls are cut from
	args    []Arg  // slab the argument lists are cut from
	scratch []Arg
	threads map[int]*thread
	// lost is the would-be state of a thread whose creating clone returned
	// no pid (`= ? <unavailable>`, its process died meanwhile); the next
	// thread without a creator takes it.
	lost  *thread
	root  int
	stats Stats
	done  bool
}

// chunk is how much input the parser reads at a time.
const chunk = 1 << 20

// NewParser returns a parser reading r.
func NewParser(r io.Reader) *Parser {
	return &Parser{
		r:       r,
		pend:    make(map[int]*pending),
		threads: make(map[int]*thread),
		root:    -1,
	}
}

// Stats returns the counts so far.
func (p *Parser) Stats() Stats { return p.stats }

// Next returns the next event in file order (see the package doc for the
// one exception: calls held back behind an unfinished clone). It returns
// io.EOF at the end, a *SyntaxError for a line it cannot read (the next
// call continues after it), or the reader's error. An error never comes
// with a call.
func (p *Parser) Next() (*Call, error) {
	for {
		if c := p.pop(); c != nil {
			return c, nil
		}
		if p.done {
			if p.readErr != nil {
				err := p.readErr
				p.readErr = nil
				return nil, fmt.Errorf("read strace output: %w", err)
			}
			return nil, io.EOF
		}
		line, ok := p.readLine()
		if !ok {
			p.finish()
			continue
		}
		p.line++
		p.stats.Lines++
		if err := p.parseLine(line); err != nil {
			p.stats.Errors++
			return nil, err
		}
	}
}

// All ranges over the events; it stops after the first error other than a
// *SyntaxError, which it yields and continues past.
func (p *Parser) All() iter.Seq2[*Call, error] {
	return func(yield func(*Call, error) bool) {
		for {
			c, err := p.Next()
			if err == io.EOF {
				return
			}
			if !yield(c, err) {
				return
			}
			var se *SyntaxError
			if err != nil && !errors.As(err, &se) {
				return
			}
		}
	}
}

// Parse calls fn with every event of r in order. It stops at the first
// error, fn's or the parser's (a *SyntaxError included).
func Parse(r io.Reader, fn func(*Call) error) (Stats, error) {
	p := NewParser(r)
	for {
		c, err := p.Next()
		if err == io.EOF {
			return p.stats, nil
		}
		if err != nil {
			return p.stats, err
		}
		if err := fn(c); err != nil {
			return p.stats, err
		}
	}
}

// Trace is a whole parsed file.
type Trace struct {
	Calls []*Call
	Stats Stats
	// Errors holds the lines ParseFileLenient skipped.
	Errors []*SyntaxError
}

// ParseFile parses a whole strace output file, gzip-compressed or not
// (such as an observer's .trace.gz). Every line must parse.
func ParseFile(path string) (*Trace, error) { return parseFile(path, false) }

// ParseFileLenient is ParseFile for a trace that may hold damaged lines (a
// strace killed in the middle of a line): they are collected in
// Trace.Errors instead of ending the parse.
func ParseFileLenient(path string) (*Trace, error) { return parseFile(path, true) }

func parseFile(path string, lenient bool) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open strace output: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	t := &Trace{}
	p := NewParser(r)
	for {
		c, err := p.Next()
		if err == io.EOF {
			break
		}
		var se *SyntaxError
		if lenient && errors.As(err, &se) {
			t.Errors = append(t.Errors, se)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		t.Calls = append(t.Calls, c)
	}
	t.Stats = p.Stats()
	return t, nil
}

func (p *Parser) readLine() (string, bool) {
	for {
		if i := strings.IndexByte(p.data[p.pos:], '\n'); i >= 0 {
			line := p.data[p.pos : p.pos+i]
			p.pos += i + 1
			return line, true
		}
		if p.eof {
			if p.pos < len(p.data) {
				line := p.data[p.pos:]
				p.pos = len(p.data)
				return line, true
			}
			return "", false
		}
		p.fill()
	}
}

func (p *Parser) fill() {
	rem := len(p.data) - p.pos
	size := chunk
	if rem*2 > size {
		size = rem * 2
	}
	b := make([]byte, size)
	copy(b, p.data[p.pos:])
	n, err := io.ReadFull(p.r, b[rem:])
	b = b[:rem+n]
	if err != nil {
		p.eof = true
		if err != io.EOF && err != io.ErrUnexpectedEOF {
			p.readErr = err
		}
	}
	// b is never written again, so the string may share its memory.
	if len(b) > 0 {
		p.data = unsafe.String(&b[0], len(b))
	} else {
		p.data = ""
	}
	p.pos = 0
}

// pop returns the queue's head if it is ready, applying its effect on the
// domain state.
func (p *Parser) pop() *Call {
	if p.head == len(p.queue) {
		if p.head > 0 {
			p.queue = p.queue[:0]
			p.head = 0
		}
		return nil
	}
	e := p.queue[p.head]
	if !e.ready {
		return nil
	}
	p.queue[p.head] = entry{}
	p.head++
	p.apply(e.call)
	p.stats.Calls++
	return e.call
}

// push queues c, or reserves a slot for a call yet to come (c nil); it
// returns the slot's index.
func (p *Parser) push(c *Call) int {
	p.queue = append(p.queue, entry{call: c, ready: c != nil})
	return len(p.queue) - 1
}

// fill puts c in a reserved slot.
func (p *Parser) fillSlot(slot int, c *Call) {
	p.queue[slot] = entry{call: c, ready: true}
}

// newCall cuts a call from the slab.
func (p *Parser) newCall() *Call {
	if len(p.calls) == 0 {
		p.calls = make([]Call, 256)
	}
	c := &p.calls[0]
	p.calls = p.calls[1:]
	return c
}

// scan splits a call's arguments into an exactly sized slice cut from the
// slab.
func (p *Parser) scan(body string) ([]Arg, int, bool) {
	args, end, ok := scanArgs(body, p.scratch[:0], true)
	p.scratch = args[:0]
	if !ok || len(args) == 0 {
		return nil, end, ok
	}
	if len(p.args) < len(args) {
		p.args = make([]Arg, max(1024, len(args)))
	}
	out := p.args[:len(args):len(args)]
	p.args = p.args[len(args):]
	copy(out, args)
	return out, end, true
}

// finish ends the input: every call still waiting for its second half is
// released as unfinished.
func (p *Parser) finish() {
	p.done = true
	for _, pid := range sortedPIDs(p.pend) {
		p.abandon(pid)
	}
}

func sortedPIDs(m map[int]*pending) []int {
	out := make([]int, 0, len(m))
	for pid := range m {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// abandon releases pid's pending first half as an unfinished call.
func (p *Parser) abandon(pid int) {
	pe := p.pend[pid]
	if pe == nil {
		return
	}
	delete(p.pend, pid)
	c := pe.call
	c.Unfinished = true
	c.Args, _, _ = p.scan(pe.text)
	p.stats.Unfinished++
	if pe.slot >= 0 {
		p.fillSlot(pe.slot, c)
		return
	}
	p.push(c)
}

// isCloneFamily reports calls that create a thread or process.
func isCloneFamily(name string) bool {
	switch name {
	case "clone", "clone3", "fork", "vfork":
		return true
	}
	return false
}

func (p *Parser) parseLine(line string) error {
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if strings.TrimSpace(line) == "" {
		return nil
	}
	pid, rest, ok := splitPID(line)
	if !ok {
		return &SyntaxError{Line: p.line, Text: line, Msg: "malformed pid prefix"}
	}
	if strings.HasPrefix(rest, "strace: ") || strings.HasPrefix(rest, "[ ") && strings.HasSuffix(rest, " ]") {
		p.stats.Messages++
		return nil // strace's own messages; -qq keeps these rare
	}
	if p.root < 0 {
		p.root = pid
	}
	switch {
	case strings.HasPrefix(rest, "--- "):
		return p.signal(pid, rest, line)
	case strings.HasPrefix(rest, "+++ "):
		return p.exit(pid, rest, line)
	case strings.HasPrefix(rest, "<... "):
		return p.resumed(pid, rest, line)
	}
	return p.syscall(pid, rest, line)
}

func splitPID(line string) (pid int, rest string, ok bool) {
	if strings.HasPrefix(line, "[pid ") {
		end := strings.IndexByte(line, ']')
		if end < 0 {
			return 0, "", false
		}
		n, ok := parseInt(strings.TrimSpace(line[5:end]))
		if !ok || n < 0 || n > 1<<31-1 {
			return 0, "", false
		}
		return int(n), strings.TrimLeft(line[end+1:], " "), true
	}
	i := 0
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, line, true
	}
	if i == len(line) || line[i] != ' ' || i > 10 {
		return 0, "", false
	}
	n, ok := parseInt(line[:i])
	if !ok || n > 1<<31-1 {
		return 0, "", false
	}
	return int(n), strings.TrimLeft(line[i:], " "), true
}

func (p *Parser) signal(pid int, rest, line string) error {
	if !strings.HasSuffix(rest, " ---") || len(rest) < 8 {
		return &SyntaxError{Line: p.line, Text: line, Msg: "signal line without closing ---"}
	}
	body := rest[4 : len(rest)-4]
	c := p.newCall()
	c.Kind, c.Line, c.PID = Signal, p.line, pid
	if name, info, ok := strings.Cut(body, " "); ok && strings.HasPrefix(name, "SIG") {
		c.Name = name
		c.Detail = strings.TrimSuffix(strings.TrimPrefix(info, "{"), "}")
	} else if strings.HasPrefix(body, "SIG") {
		c.Name = body
	} else {
		c.Detail = body
		if i := strings.LastIndex(body, "SIG"); i >= 0 {
			c.Name = body[i:]
		}
	}
	p.push(c)
	return nil
}

func (p *Parser) exit(pid int, rest, line string) error {
	if !strings.HasSuffix(rest, " +++") || len(rest) < 8 {
		return &SyntaxError{Line: p.line, Text: line, Msg: "exit line without closing +++"}
	}
	body := rest[4 : len(rest)-4]
	c := p.newCall()
	c.Line, c.PID = p.line, pid
	switch {
	case strings.HasPrefix(body, "exited with "):
		n, ok := parseInt(body[len("exited with "):])
		if !ok {
			return &SyntaxError{Line: p.line, Text: line, Msg: "exit status is not a number"}
		}
		c.Kind, c.Status = Exit, int(n)
	case strings.HasPrefix(body, "killed by "):
		sig := body[len("killed by "):]
		if s, d, ok := strings.Cut(sig, " "); ok {
			sig, c.Detail = s, strings.Trim(d, "()")
		}
		c.Kind, c.Name = Killed, sig
	case strings.HasPrefix(body, "superseded by execve in pid "):
		n, ok := parseInt(body[len("superseded by execve in pid "):])
		if !ok {
			return &SyntaxError{Line: p.line, Text: line, Msg: "superseding pid is not a number"}
		}
		c.Kind, c.Status = Superseded, int(n)
		// The leader's own pending call never returns; the executing
		// thread's pending execve resumes under the leader's pid.
		p.abandon(pid)
		if pe := p.pend[int(n)]; pe != nil {
			delete(p.pend, int(n))
			pe.call.PID = pid
			p.pend[pid] = pe
		}
		p.push(c)
		return nil
	default:
		return &SyntaxError{Line: p.line, Text: line, Msg: "unknown +++ line"}
	}
	p.abandon(pid)
	p.push(c)
	return nil
}

const unfinishedMark = " <unfinished ...>"

func (p *Parser) syscall(pid int, rest, line string) error {
	open := strings.IndexByte(rest, '(')
	if open <= 0 || !isName(rest[:open]) {
		return &SyntaxError{Line: p.line, Text: line, Msg: "no system call name"}
	}
	name, body := rest[:open], rest[open+1:]
	if text, ok := cutUnfinished(body); ok {
		if old := p.pend[pid]; old != nil {
			p.abandon(pid)
		}
		c := p.newCall()
		c.Kind, c.Line, c.PID, c.Name = Syscall, p.line, pid, name
		pe := &pending{call: c, text: text, slot: -1}
		if isCloneFamily(name) {
			pe.slot = p.push(nil)
		}
		p.pend[pid] = pe
		return nil
	}
	c := p.newCall()
	c.Kind, c.Line, c.PID, c.Name = Syscall, p.line, pid, name
	if msg := p.complete(c, body); msg != "" {
		if k := nextEvent(body); k >= 0 {
			// strace began this call's line, then printed another event
			// without ending it (`4686  ???(4686  +++ superseded by execve
			// in pid 4690 +++`): the call is a first half that never
			// resumes, the rest a line of its own.
			if p.pend[pid] != nil {
				p.abandon(pid)
			}
			*c = Call{Kind: Syscall, Line: p.line, PID: pid, Name: name}
			p.pend[pid] = &pending{call: c, text: body[:k], slot: -1}
			return p.parseLine(body[k:])
		}
		return &SyntaxError{Line: p.line, Text: line, Msg: msg}
	}
	p.push(c)
	return nil
}

// nextEvent finds, in the text after a call's '(', the start of another
// event's line strace printed before ending this one: a pid followed by
// spaces and `+++ `, `--- ` or `<... `. It returns -1 if there is none.
func nextEvent(body string) int {
	for i := 0; i < len(body); i++ {
		if body[i] < '0' || body[i] > '9' || i > 0 && body[i-1] >= '0' && body[i-1] <= '9' {
			continue
		}
		j := i
		for j < len(body) && body[j] >= '0' && body[j] <= '9' {
			j++
		}
		if j == len(body) || body[j] != ' ' {
			continue
		}
		k := j
		for k < len(body) && body[k] == ' ' {
			k++
		}
		r := body[k:]
		if strings.HasPrefix(r, "+++ ") || strings.HasPrefix(r, "--- ") || strings.HasPrefix(r, "<... ") {
			if i > 0 && body[i-1] != '(' && body[i-1] != ' ' && body[i-1] != ',' {
				continue
			}
			return i
		}
	}
	return -1
}

// cutUnfinished strips strace's marks of a first half: `<unfinished ...>`,
// `<pid changed to N ...>` on an execve by a non-leader thread, or
// `<detached ...>` when strace let go of the thread inside the call.
func cutUnfinished(body string) (string, bool) {
	if strings.HasSuffix(body, unfinishedMark) {
		return body[:len(body)-len(unfinishedMark)], true
	}
	if strings.HasSuffix(body, " <detached ...>") {
		return body[:len(body)-len(" <detached ...>")], true
	}
	if strings.HasSuffix(body, " ...>") {
		if i := strings.LastIndex(body, " <pid changed to "); i >= 0 {
			return body[:i], true
		}
	}
	return "", false
}

func (p *Parser) resumed(pid int, rest, line string) error {
	end := strings.Index(rest[5:], " resumed>")
	if end < 0 {
		return &SyntaxError{Line: p.line, Text: line, Msg: "resumed half without '<... name resumed>'"}
	}
	end += 5
	name := rest[5:end]
	tail := rest[end+len(" resumed>"):]
	pe := p.pend[pid]
	if pe == nil || pe.call.Name != name {
		p.stats.Orphans++
		return nil
	}
	delete(p.pend, pid)
	c := pe.call
	c.Joined = true
	body := pe.text + tail
	if text, ok := cutUnfinished(body); ok {
		// Printed in three pieces: wait for the next resumption.
		pe.text = text
		p.pend[pid] = pe
		return nil
	}
	if msg := p.complete(c, body); msg != "" {
		if pe.slot >= 0 {
			c.Unfinished = true
			p.fillSlot(pe.slot, c)
		}
		return &SyntaxError{Line: p.line, Text: line, Msg: msg}
	}
	if pe.slot >= 0 {
		p.fillSlot(pe.slot, c)
		return nil
	}
	p.push(c)
	return nil
}

func isName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '?' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return s != ""
}

// complete parses `args) = result …` into c; it returns a message for
// text that does not parse.
func (p *Parser) complete(c *Call, body string) string {
	args, end, ok := p.scan(body)
	if !ok {
		return "arguments do not scan"
	}
	if end < 0 {
		return "no ')' closing the arguments"
	}
	c.Args = args
	r := strings.TrimLeft(body[end+1:], " ")
	if !strings.HasPrefix(r, "=") {
		return "no '=' before the result"
	}
	r = strings.TrimLeft(r[1:], " ")
	if r == "" {
		return "empty result"
	}
	// The result token, with its -y annotation.
	i := 0
	for i < len(r) && r[i] != ' ' && r[i] != '<' {
		i++
	}
	if i < len(r) && r[i] == '<' {
		k := skipAnnotation(r, i)
		if k < 0 {
			return "unterminated annotation on the result"
		}
		i = k
	}
	c.Ret = r[:i]
	if c.Ret == "" {
		return "empty result"
	}
	r = strings.TrimLeft(r[i:], " ")
	if r == "" {
		return ""
	}
	if r[0] == 'E' {
		name, text, _ := strings.Cut(r, " ")
		if !isName(name) {
			return "malformed error name"
		}
		c.Errno = name
		text = strings.TrimSpace(text)
		if strings.HasPrefix(text, "(") && strings.HasSuffix(text, ")") {
			text = text[1 : len(text)-1]
		}
		c.ErrnoText = text
		return ""
	}
	if r[0] == '(' && r[len(r)-1] == ')' {
		c.Detail = r[1 : len(r)-1]
		return ""
	}
	c.Detail = r
	return ""
}

// apply sets a released call's domain fields and applies its effect.
func (p *Parser) apply(c *Call) {
	th := p.threads[c.PID]
	if th == nil {
		th = &thread{tgid: c.PID}
		switch {
		case c.PID == p.root:
		case p.lost != nil:
			th.depth = p.lost.depth
			if p.lost.tgid != 0 {
				th.tgid = p.lost.tgid
			}
			p.lost = nil
			p.stats.Inferred++
		default:
			p.stats.Unplaced++
		}
		p.threads[c.PID] = th
	}
	c.TGID, c.Depth, c.InDomain = th.tgid, th.depth, th.depth > 0
	switch c.Kind {
	case Exit, Killed:
		delete(p.threads, c.PID)
		return
	case Superseded:
		if old := p.threads[c.Status]; old != nil && c.Status != c.PID {
			th.depth = old.depth
			delete(p.threads, c.Status)
		}
		th.tgid = c.PID
		return
	case Signal:
		return
	}
	if c.Failed() || c.Unfinished {
		return
	}
	switch {
	case c.Name == "landlock_restrict_self":
		if c.Ret != "0" || len(c.Args) < 2 {
			return
		}
		if fd, ok := c.Args[0].FD(); ok && fd.Num == -1 {
			return // logging configuration only, no new domain
		}
		// strace 6.1 prints TSYNC as a number.
		if c.Args[1].HasFlag("LANDLOCK_RESTRICT_SELF_TSYNC") || c.Args[1].FlagBits()&uint64(landlock.RestrictTSync) != 0 {
			for _, o := range p.threads {
				if o.tgid == th.tgid && o != th {
					o.depth++
				}
			}
		}
		th.depth++
	case isCloneFamily(c.Name):
		sameGroup := false
		for _, a := range c.Args {
			if strings.Contains(string(a), "CLONE_THREAD") {
				sameGroup = true
			}
		}
		child, ok := c.Result()
		if c.Ret == "?" {
			p.lost = &thread{depth: th.depth}
			if sameGroup {
				p.lost.tgid = th.tgid
			}
			return
		}
		if !ok || child <= 0 || child > 1<<31-1 {
			return
		}
		nt := &thread{depth: th.depth, tgid: int(child)}
		if sameGroup {
			nt.tgid = th.tgid
		}
		if _, seen := p.threads[int(child)]; seen || int(child) == p.root {
			p.stats.Reused++
		}
		p.threads[int(child)] = nt
	}
}
