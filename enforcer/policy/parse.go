package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
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

// Limit value bounds: a value with more significant digits, or above the
// maximum, is refused. The digit bounds are Phobos's, so a policy either
// accepts, the other does too.
const (
	maxTimeoutDigits = 15            // significant integer digits of a timeout
	maxLimitDigits   = 18            // significant digits of every other limit
	MaxMB            = 8796093022207 // largest mem_mb / fsize_mb (KiB fits in a 63-bit rlimit)
	// MaxSeconds is the largest timeout and cpu (10^9 s, about 31.7 years).
	// Either becomes a time.Duration somewhere (the enforcer's timer, the
	// pruner's measurements), whose int64 nanoseconds end at about 292
	// years: a larger value would wrap (timeout=18446744074 was a 290 ms
	// limit, 9223372037 none at all). The margin leaves room for the sums
	// made from a limit, such as a kill grace.
	MaxSeconds = 1_000_000_000
)

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

// ParseFile reads and parses the policy file at path. A path that is empty,
// missing, a dangling link, a directory, not a regular file or unreadable is
// refused with its own message.
func ParseFile(name string) (*Policy, error) {
	data, err := readPolicyFile(name)
	if err != nil {
		return nil, ErrorList{err}
	}
	return Parse(name, data)
}

// MaxFileBytes bounds a policy file: the largest shipped base is a few
// kilobytes, and a read of /dev/zero or a growing file must end.
const MaxFileBytes = 16 << 20

// ReadFile reads the policy file at name as ParseFile does, with the same
// refusals, as an ErrorList.
func ReadFile(name string) ([]byte, error) {
	data, err := readPolicyFile(name)
	if err != nil {
		return nil, ErrorList{err}
	}
	return data, nil
}

func readPolicyFile(name string) ([]byte, *Error) {
	if name == "" {
		return nil, &Error{File: `""`, Msg: "an empty policy path was given; name a .cfg file"}
	}
	fi, err := os.Stat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, lerr := os.Lstat(name); lerr == nil {
				return nil, &Error{File: name, Msg: "is a dangling symbolic link; want a readable .cfg file"}
			}
			return nil, &Error{File: name, Msg: "does not exist; want a readable .cfg file"}
		}
		return nil, &Error{File: name, Msg: fmt.Sprintf("cannot be inspected: %v", unwrapPath(err))}
	}
	if fi.IsDir() {
		return nil, &Error{File: name, Msg: "is a directory; want a .cfg file"}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{File: name, Msg: fmt.Sprintf("is %s, not a regular file; want a .cfg file", safefile.Kind(fi.Mode()))}
	}
	data, err := safefile.ReadFile(name, MaxFileBytes)
	if err != nil {
		return nil, &Error{File: name, Msg: fmt.Sprintf("cannot be read: %v", unwrapPath(err))}
	}
	return data, nil
}

func unwrapPath(err error) error {
	if se, ok := errors.AsType[*safefile.Error](err); ok {
		return errors.New(se.Problem)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Load combines policy files: every
// Base*.cfg of baseDir in sorted order (baseDir "" means no bases; a baseDir
// without any Base*.cfg is refused, so nothing ever runs unconfined by
// accident), then each config in order. Paths and network rules are unioned,
// limits combined (a zero spelling switches a limit off and wins, else the
// largest value). When configs is empty every [connect] and
// [bind] row of the bases is dropped: no network without an exercise config.
// Problems of every file are reported together.
func Load(baseDir string, configs []string) (*Policy, error) {
	var files []string
	var errs ErrorList
	if baseDir != "" {
		bases, err := baseFiles(baseDir)
		if err != nil {
			errs = append(errs, err)
		}
		files = append(files, bases...)
	}
	files = append(files, configs...)
	var ps []*Policy
	for _, f := range files {
		p, err := ParseFile(f)
		if err != nil {
			errs = append(errs, err.(ErrorList)...)
			continue
		}
		ps = append(ps, p)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	u := Union(ps...)
	if len(configs) == 0 {
		u.Connect, u.Bind = nil, nil
	}
	return u, nil
}

// baseFiles lists the Base*.cfg files of dir in sorted order. dir is taken
// literally: only the file names inside it are matched, so a directory
// named "bases*" or "[x]" is that one directory, never a pattern that could
// merge several.
func baseFiles(dir string) ([]string, *Error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{File: dir, Msg: "does not exist; want the directory holding the Base*.cfg files"}
	case err != nil && !isDir(dir):
		return nil, &Error{File: dir, Msg: "is not a directory; want the directory holding the Base*.cfg files"}
	case err != nil:
		return nil, &Error{File: dir, Msg: fmt.Sprintf("cannot list Base*.cfg: %v", unwrapPath(err))}
	}
	var bases []string
	for _, e := range entries { // ReadDir sorts by name
		if ok, _ := filepath.Match("Base*.cfg", e.Name()); ok {
			bases = append(bases, filepath.Join(dir, e.Name()))
		}
	}
	if len(bases) == 0 {
		return nil, &Error{File: dir, Msg: "holds no Base*.cfg; a base directory needs at least one base"}
	}
	return bases, nil
}

func isDir(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
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

func splitTransport(n int, p *parser, words []string, shape string) (Transport, bool) {
	if len(words) == 1 {
		return TCP, true
	}
	switch Transport(words[1]) {
	case TCP, UDP:
		return Transport(words[1]), true
	}
	p.errorf(n, "[%s] transport %q is neither tcp nor udp; a row is %s", p.section, words[1], shape)
	return "", false
}

const connectShape = "allow <host>[:<port>] [tcp|udp]"

func (p *parser) connect(n int, s, comment string) {
	rest, ok := strings.CutPrefix(s, "allow")
	if !ok || rest == "" || !isSpace(rune(rest[0])) || trim(rest) == "" {
		p.errorf(n, "[connect] row %q is not %s", s, connectShape)
		return
	}
	words := strings.FieldsFunc(rest, isSpace)
	if len(words) > 2 {
		p.errorf(n, "[connect] row %q has %d words after allow; a row is %s", s, len(words), connectShape)
		return
	}
	tr, ok := splitTransport(n, p, words, connectShape)
	if !ok {
		return
	}
	r, msg := parseConnectTarget(words[0])
	if msg != "" {
		p.errorf(n, "[connect] %s", msg)
		return
	}
	r.Transport, r.Comment = tr, comment
	p.pol.addConnect(r)
}

// parseConnectTarget splits <host>[:<port>] (an IPv6 host in brackets, or
// bare with no port; no port means every port) and checks the host and the
// port, returning the rule or what is wrong.
func parseConnectTarget(t string) (ConnectRule, string) {
	var host, port string
	switch {
	case strings.HasPrefix(t, "["):
		end := strings.IndexByte(t, ']')
		if end < 0 {
			return ConnectRule{}, fmt.Sprintf("target %q opens [ and never closes it", t)
		}
		host = t[1:end]
		after := t[end+1:]
		switch {
		case after == "":
			port = "*"
		case after[0] == ':':
			port = after[1:]
			if port == "" {
				return ConnectRule{}, fmt.Sprintf("target %q names a host and then no port; write a port or *", t)
			}
		default:
			return ConnectRule{}, fmt.Sprintf("target %q has %q after the bracketed host; want [addr]:port", t, after)
		}
		if !strings.Contains(host, ":") {
			return ConnectRule{}, fmt.Sprintf("target %q brackets %q, which is not an IPv6 address", t, host)
		}
	case strings.Count(t, ":") >= 2:
		host, port = t, "*"
	case strings.Contains(t, ":"):
		i := strings.LastIndexByte(t, ':')
		host, port = t[:i], t[i+1:]
		if port == "" {
			return ConnectRule{}, fmt.Sprintf("target %q names a host and then no port; write a port or *", t)
		}
	default:
		host, port = t, "*"
	}
	if host == "" {
		return ConnectRule{}, fmt.Sprintf("target %q names no host; write * for every host", t)
	}
	h, msg := canonicalHost(host)
	if msg != "" {
		return ConnectRule{}, msg
	}
	r := ConnectRule{Host: h}
	if port != "*" {
		v, ok := parsePort(port, false)
		if !ok {
			return ConnectRule{}, fmt.Sprintf("port %q of %q is not 1-65535 without leading zeros (write * for every port of a loopback host)", port, t)
		}
		r.Port = v
	} else if !isLoopbackHost(h) {
		return ConnectRule{}, fmt.Sprintf("%q names no port; only one loopback host (localhost, an address in 127.0.0.0/8, ::1) may be allowed on every port", t)
	}
	return r, ""
}

// parsePort accepts 1-65535 without leading zeros, and "0" when zero is true.
func parsePort(s string, zero bool) (int, bool) {
	if s == "0" {
		return 0, zero
	}
	if len(s) == 0 || len(s) > 5 || s[0] < '1' || s[0] > '9' || !allDigits(s) {
		return 0, false
	}
	v, _ := strconv.Atoi(s)
	return v, v <= 65535
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// canonicalHost checks a [connect] host and returns its canonical spelling.
func canonicalHost(h string) (string, string) {
	if h == "*" {
		return h, ""
	}
	if strings.Contains(h, "*") {
		return "", fmt.Sprintf("host %q holds a wildcard; only * alone (every host) is accepted", h)
	}
	if a, pfx, ok := strings.Cut(h, "/"); ok {
		addr, msg := parseAddr(a)
		if msg != "" {
			return "", fmt.Sprintf("network %q: %s", h, msg)
		}
		if len(pfx) == 0 || len(pfx) > 3 || !allDigits(pfx) {
			return "", fmt.Sprintf("network %q has prefix %q; want 1-32 (IPv4) or 1-128 (IPv6) digits", h, pfx)
		}
		bits, _ := strconv.Atoi(pfx)
		switch {
		case bits == 0:
			return "", fmt.Sprintf("network %q has prefix 0; write * for every host", h)
		case addr.Is4() && bits > 32, addr.Is6() && bits > 128:
			return "", fmt.Sprintf("network %q has prefix %d, longer than the address", h, bits)
		case addr.Is4In6() && bits < 96:
			return "", fmt.Sprintf("network %q is IPv4-mapped with prefix %d below 96; write the IPv4 network instead", h, bits)
		}
		return addr.String() + "/" + strconv.Itoa(bits), ""
	}
	if strings.Trim(h, "0123456789.") == "" || strings.Contains(h, ":") {
		addr, msg := parseAddr(h)
		if msg != "" {
			return "", msg
		}
		return addr.String(), ""
	}
	if msg := checkDNSName(h); msg != "" {
		return "", msg
	}
	return strings.ToLower(h), ""
}

// parseAddr accepts a strict IPv4 dotted quad or an IPv6 literal without zone.
func parseAddr(s string) (netip.Addr, string) {
	if !strings.Contains(s, ":") {
		parts := strings.Split(s, ".")
		ok := len(parts) == 4
		for _, q := range parts {
			if len(q) == 0 || len(q) > 3 || !allDigits(q) || (len(q) > 1 && q[0] == '0') {
				ok = false
				break
			}
			if v, _ := strconv.Atoi(q); v > 255 {
				ok = false
			}
		}
		if !ok {
			return netip.Addr{}, fmt.Sprintf("%q is not an IPv4 address (want four numbers 0-255 without leading zeros)", s)
		}
		return netip.MustParseAddr(s), ""
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return netip.Addr{}, fmt.Sprintf("%q is not an IPv6 address (zones are not accepted)", s)
	}
	return a, ""
}

func checkDNSName(h string) string {
	if len(h) > 253 {
		return fmt.Sprintf("host name %q is longer than 253 characters", h)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Sprintf("host name %q has an empty or over-long label", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("host %q is neither an address nor a host name (letters, digits, - and _ in dot-separated labels)", h)
			}
		}
	}
	return ""
}

// isLoopbackHost reports whether a canonical host names exactly one loopback
// address (optionally as /32 or /128).
func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, pfx, hasPfx := strings.Cut(h, "/")
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return false
	}
	if hasPfx && !(addr.Is4() && pfx == "32" || addr.Is6() && pfx == "128") {
		return false
	}
	return addr.Unmap().IsLoopback()
}

const bindShape = "allow <port> [tcp|udp] with port 0 (kernel-chosen) or 1-65535"

func (p *parser) bind(n int, s, comment string) {
	words := strings.FieldsFunc(s, isSpace)
	if words[0] != "allow" || len(words) < 2 || len(words) > 3 {
		p.errorf(n, "[bind] row %q is not %s", s, bindShape)
		return
	}
	tr, ok := splitTransport(n, p, words[1:], bindShape)
	if !ok {
		return
	}
	if !allDigits(words[1]) {
		p.errorf(n, "[bind] %q is not a port; Landlock binds by port only (%s)", words[1], bindShape)
		return
	}
	port, ok := parsePort(words[1], true)
	if !ok {
		p.errorf(n, "[bind] port %q is not 0 or 1-65535 without leading zeros", words[1])
		return
	}
	p.pol.addBind(BindRule{Port: port, Transport: tr, Comment: comment})
}

func (p *parser) limit(n int, s string) {
	eq := strings.IndexByte(s, '=')
	if eq < 0 {
		p.errorf(n, "[limits] row %q is not key=value (keys: timeout, cpu, mem_mb, nproc, nofile, fsize_mb)", s)
		return
	}
	key, val := LimitKey(trim(s[:eq])), trim(s[eq+1:])
	l, msg := ParseLimit(key, val)
	if msg != nil {
		p.errorf(n, "[limits] %v", msg)
		return
	}
	p.pol.Limits[key] = combineLimit(p.pol.Limits[key], l, p.pol.hasLimit(key))
}

func (p *Policy) hasLimit(k LimitKey) bool { _, ok := p.Limits[k]; return ok }

// ParseLimit checks one [limits] value for key. timeout is seconds with no
// or exactly three decimals (stored in milliseconds); the others are plain
// ASCII digits. A zero spelling ("0", "000", "0.000") switches the limit off.
func ParseLimit(key LimitKey, val string) (Limit, error) {
	known := false
	for _, k := range LimitKeys {
		known = known || k == key
	}
	if !known {
		return Limit{}, fmt.Errorf("unknown key %q; known keys: timeout, cpu, mem_mb, nproc, nofile, fsize_mb", key)
	}
	intPart, frac, hasFrac := val, "", false
	if key == Timeout {
		intPart, frac, hasFrac = strings.Cut(val, ".")
	}
	if !allDigits(intPart) || hasFrac && (len(frac) != 3 || !allDigits(frac)) {
		if key == Timeout {
			return Limit{}, fmt.Errorf("timeout %q is not seconds with no or exactly three decimals (e.g. 90 or 1.500)", val)
		}
		return Limit{}, fmt.Errorf("%s %q is not a whole number of ASCII digits", key, val)
	}
	sig := strings.TrimLeft(intPart, "0")
	maxDigits := maxLimitDigits
	if key == Timeout {
		maxDigits = maxTimeoutDigits
	}
	if len(sig) > maxDigits {
		return Limit{}, fmt.Errorf("%s %q has more than %d significant digits", key, val, maxDigits)
	}
	v, _ := strconv.ParseInt("0"+sig, 10, 64)
	if key == Timeout {
		ms := int64(0)
		if hasFrac {
			ms, _ = strconv.ParseInt(frac, 10, 64)
		}
		v = v*1000 + ms
	}
	if (key == MemMB || key == FsizeMB) && v > MaxMB {
		return Limit{}, fmt.Errorf("%s %q is larger than %d", key, val, int64(MaxMB))
	}
	if key == Timeout && v > MaxSeconds*1000 || key == CPU && v > MaxSeconds {
		return Limit{}, fmt.Errorf("%s %q is more than %d seconds (about 31 years); write 0 for no limit", key, val, MaxSeconds)
	}
	if v == 0 {
		return Limit{Off: true}, nil
	}
	return Limit{Value: v}, nil
}

// combineLimit merges b into a (present tells whether a was set): a zero
// spelling switches the limit off and wins, else the largest value.
func combineLimit(a, b Limit, present bool) Limit {
	if !present {
		return b
	}
	if a.Off || b.Off {
		return Limit{Off: true}
	}
	if b.Value > a.Value {
		return b
	}
	return a
}

func (p *Policy) addConnect(r ConnectRule) {
	for i, c := range p.Connect {
		if c.Host == r.Host && c.Port == r.Port && c.Transport == r.Transport {
			if c.Comment == "" {
				p.Connect[i].Comment = r.Comment
			}
			return
		}
	}
	p.Connect = append(p.Connect, r)
}

func (p *Policy) addBind(r BindRule) {
	for i, c := range p.Bind {
		if c.Port == r.Port && c.Transport == r.Transport {
			if c.Comment == "" {
				p.Bind[i].Comment = r.Comment
			}
			return
		}
	}
	p.Bind = append(p.Bind, r)
}
