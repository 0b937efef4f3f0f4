package strace

import (
	"strings"
)

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
