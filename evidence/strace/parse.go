package strace

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"unsafe"
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
