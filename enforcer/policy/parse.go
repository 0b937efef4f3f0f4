package policy

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// knownSections lists every section name the grammar recognises, including
// [accept], which is recognised only to be refused.
var knownSections = map[Section]bool{
	Read: true, Execute: true, Write: true, Create: true, CreateIPC: true, CreateSymlink: true,
	Delete: true, Restructure: true, Ioctl: true, Connect: true, Bind: true, Accept: true, Limits: true,
}

const sectionList = "read, execute, write, create, create-ipc, create-symlink, delete, restructure, ioctl, connect, bind, limits"

// acceptRefusal is the reason [accept] is refused.
const acceptRefusal = "[accept] is not supported: lockstep has no inbound proxy, so an exposed port could not be filtered by source; remove the section and grant the listening port with [bind]"

// Parse reads one policy file's bytes. file names it in messages. Every
// problem is reported at once as an ErrorList (sorted, file:line each); on any
// problem the policy is nil. Parse never touches the file system.
//
// Lexing: LF line ends only (a CR anywhere is refused), no UTF-8 byte order
// mark, no NUL byte; "#" starts a comment anywhere on a line; lines are
// trimmed of ASCII white space; a section header is "[name]"; a row before
// the first header is refused. These are Phobos's lexing rules, so both
// read a policy file alike.
//
// Comments are kept for rendering: the comment lines directly above a row
// (and a comment after it on the same line) belong to that row's path or
// network rule; comment lines before the first section are the header. A
// blank line or a section header ends a pending comment. Comment text is
// stored escaped (bytes outside printable ASCII, and "#", as \xHH), as Render
// writes it, so that Parse(Render(p)) equals p.
func Parse(file string, src []byte) (*Policy, error) {
	p := &parser{file: file, pol: newPolicy()}
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		p.errorf(1, "the file starts with a UTF-8 byte order mark; save it without one")
		src = src[3:]
	}
	lines := bytes.Split(src, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		p.line(i+1, l)
	}
	if err := p.errs.err(); err != nil {
		return nil, err
	}
	return p.pol, nil
}

func newPolicy() *Policy {
	return &Policy{
		FS:       map[string]map[Section]bool{},
		Limits:   map[LimitKey]Limit{},
		Comments: map[string]string{},
	}
}

type parser struct {
	file    string
	pol     *Policy
	errs    ErrorList
	section Section // "" before the first header
	skip    bool    // inside an unknown or refused section: rows are not judged
	started bool    // a section header was seen: comments are no longer header
	pending []string
}

func (p *parser) errorf(line int, format string, a ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, a...)})
}

// isSpace is bash's [[:space:]] in the C locale.
func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r'
}

func trim(s string) string { return strings.TrimFunc(s, isSpace) }

// line reads line n: a comment, a section header or a row of the current
// section.
func (p *parser) line(n int, raw []byte) {
	if !p.isText(n, raw) {
		p.pending = nil
		return
	}
	content, comment, hasComment := strings.Cut(string(raw), "#")
	content = trim(content)
	if content == "" {
		p.comment(comment, hasComment)
		return
	}
	note := p.takeNote(comment, hasComment)
	if len(content) > 2 && content[0] == '[' && content[len(content)-1] == ']' {
		p.header(n, Section(content[1:len(content)-1]))
		return
	}
	if p.skip {
		return
	}
	p.row(n, content, strings.Join(note, "\n"))
}

// isText reports whether line n is text a policy may hold (no NUL, no
// CR), naming the problem when it is not.
func (p *parser) isText(n int, raw []byte) bool {
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		p.errorf(n, "holds a NUL byte (column %d); a policy is text", i+1)
		return false
	}
	if bytes.IndexByte(raw, '\r') >= 0 {
		p.errorf(n, "has a Windows line ending (CR); save the file with LF line endings")
		return false
	}
	return true
}

// comment takes a line without content: its comment belongs to the header
// before the first section and to the next row after it; an empty line
// drops the comments pending for the next row.
func (p *parser) comment(comment string, hasComment bool) {
	if !hasComment {
		p.pending = nil
		return
	}
	text := escapeComment(trim(comment))
	if !p.started {
		p.pol.Header = append(p.pol.Header, text)
	} else {
		p.pending = append(p.pending, text)
	}
}

// takeNote returns the comments pending for this line plus its own, and
// clears the pending ones.
func (p *parser) takeNote(comment string, hasComment bool) []string {
	var note []string
	if len(p.pending) > 0 {
		note = p.pending
	}
	if hasComment {
		if t := escapeComment(trim(comment)); t != "" {
			note = append(note, t)
		}
	}
	p.pending = nil
	return note
}

// row reads a row of the current section, with note as its comment.
func (p *parser) row(n int, content, note string) {
	if p.section == "" {
		if content[0] == '[' {
			p.errorf(n, "%q is not a section header; write [name] with one of: %s", content, sectionList)
		} else {
			p.errorf(n, "the row %q appears before any [section] header", content)
		}
		return
	}
	if content[0] == '[' {
		p.errorf(n, "%q is not a section header; write [name] with one of: %s", content, sectionList)
		return
	}
	switch p.section {
	case Connect:
		p.connect(n, content, note)
	case Bind:
		p.bind(n, content, note)
	case Limits:
		p.limit(n, content)
	default:
		p.path(n, content, note)
	}
}

func (p *parser) header(n int, s Section) {
	p.started = true
	p.section, p.skip = "", true
	switch {
	case s == Accept:
		p.errorf(n, "%s", acceptRefusal)
	case !knownSections[s]:
		p.errorf(n, "unknown section [%s]; known sections: %s", s, sectionList)
	default:
		p.section, p.skip = s, false
	}
}

func (p *parser) path(n int, s, comment string) {
	if msg := checkPath(s); msg != "" {
		p.errorf(n, "[%s] %s", p.section, msg)
		return
	}
	secs := p.pol.FS[s]
	if secs == nil {
		secs = map[Section]bool{}
		p.pol.FS[s] = secs
	}
	secs[p.section] = true
	if comment != "" && p.pol.Comments[s] == "" {
		p.pol.Comments[s] = comment
	}
}

// checkPath returns why s cannot be a policy path, or "".
func checkPath(s string) string {
	switch {
	case !utf8.ValidString(s):
		return fmt.Sprintf("path %q is not valid UTF-8", s)
	case s == "":
		return "empty path"
	case s[0] != '/':
		return fmt.Sprintf("path %q is not absolute; a policy path starts with / (no ~, $HOME, quotes or relative names)", s)
	case strings.ContainsAny(s, "*?["):
		return fmt.Sprintf("path %q holds a glob character (* ? [); policy paths are literal", s)
	case strings.ContainsAny(s, "#"):
		return fmt.Sprintf("path %q holds #, which starts a comment", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return fmt.Sprintf("path %q holds a control or line-break character", s)
		}
	}
	if trim(s) != s {
		return fmt.Sprintf("path %q has leading or trailing white space", s)
	}
	if strings.HasPrefix(s, "//") || path.Clean(s) != s {
		return fmt.Sprintf("path %q is not in normal form; write %q (no //, /./, /../ or trailing /)", s, path.Clean(s))
	}
	return ""
}
