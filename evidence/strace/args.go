package strace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Arg is one argument of a call as strace printed it.
type Arg string

// Str decodes a string argument (see [Unquote]); ok is false when the
// argument is not a well-formed string literal.
func (a Arg) Str() (s string, ok bool) {
	s, _, err := Unquote(string(a))
	return s, err == nil
}

// Int reads a numeric argument (decimal, negative, or 0x hexadecimal);
// a trailing comment such as `/* LANDLOCK_RULE_??? */` is ignored.
func (a Arg) Int() (int64, bool) {
	s := string(a)
	if i := strings.Index(s, " /*"); i >= 0 {
		s = s[:i]
	}
	return parseInt(s)
}

// Flags splits a flag set (`O_WRONLY|O_CREAT|0x4000`) into its words, with
// strace's comments removed (`0x2 /* LANDLOCK_??? */` gives "0x2").
func (a Arg) Flags() []string {
	s := stripComments(string(a))
	if s == "" {
		return nil
	}
	return strings.Split(s, "|")
}

// HasFlag reports whether the flag set names flag.
func (a Arg) HasFlag(flag string) bool {
	s := string(a)
	for len(s) > 0 {
		i := strings.Index(s, flag)
		if i < 0 {
			return false
		}
		end := i + len(flag)
		if (i == 0 || s[i-1] == '|' || s[i-1] == '{' || s[i-1] == '=') &&
			(end == len(s) || s[end] == '|' || s[end] == ',' || s[end] == ' ' || s[end] == '}') {
			return true
		}
		s = s[end:]
	}
	return false
}

// FlagBits returns the bitwise or of the numeric words of a flag set (the
// constants strace 6.1 could not name), so that a caller can test a known
// bit value that strace printed as a number.
func (a Arg) FlagBits() uint64 {
	var v uint64
	for _, f := range a.Flags() {
		if n, ok := parseInt(f); ok {
			v |= uint64(n)
		}
	}
	return v
}

func stripComments(s string) string {
	if !strings.Contains(s, "/*") {
		return strings.TrimSpace(s)
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "/*")
		if i < 0 {
			b.WriteString(s)
			return strings.TrimSpace(b.String())
		}
		b.WriteString(s[:i])
		j := strings.Index(s[i:], "*/")
		if j < 0 {
			return strings.TrimSpace(b.String())
		}
		s = s[i+j+2:]
	}
}

// Field returns the value of `name=value` among a structure's top-level
// fields (`{sa_family=AF_INET, sin_port=htons(80), …}`), or of the
// argument itself when it is `name=value`.
func (a Arg) Field(name string) (Arg, bool) {
	s := strings.TrimSpace(string(a))
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = s[1 : len(s)-1]
	}
	for _, f := range splitTop(s) {
		if len(f) > len(name) && f[len(name)] == '=' && strings.HasPrefix(string(f), name) {
			return f[len(name)+1:], true
		}
	}
	return "", false
}

// FD is a descriptor argument with its -y annotation.
type FD struct {
	// Num is the descriptor; AT_FDCWD is -100.
	Num int
	// Annotation is the decoded text between < and > ("" without -y).
	Annotation string
	// Path is the file the descriptor names, when the annotation is a path.
	Path string
	// Proto is the kind for a non-file descriptor: "socket", "pipe",
	// "anon_inode", or the protocol -yy prints ("TCP", "UDPv6", "UNIX-STREAM").
	Proto string
	// Inode is the number in `socket:[N]`, `pipe:[N]`, `TCP:[N]`, if any.
	Inode uint64
}

// ATFDCWD is the value of Num for AT_FDCWD.
const ATFDCWD = -100

// FD reads a descriptor argument (`3</etc/passwd>`, `AT_FDCWD</home>`,
// `5<socket:[123]>`, `4`).
func (a Arg) FD() (FD, bool) {
	s := string(a)
	num, rest := s, ""
	if i := strings.IndexByte(s, '<'); i >= 0 {
		if !strings.HasSuffix(s, ">") {
			return FD{}, false
		}
		num, rest = s[:i], s[i+1:len(s)-1]
	}
	var fd FD
	if num == "AT_FDCWD" {
		fd.Num = ATFDCWD
	} else {
		n, ok := parseInt(num)
		if !ok || n < -1<<31 || n > 1<<31-1 {
			return FD{}, false
		}
		fd.Num = int(n)
	}
	if rest == "" {
		return fd, true
	}
	// -yy adds the device after a path: `/dev/null<char 1:3>`.
	if j := strings.LastIndex(rest, "<"); j > 0 && (strings.HasPrefix(rest[j:], "<char ") || strings.HasPrefix(rest[j:], "<block ")) && strings.HasSuffix(rest, ">") {
		rest = rest[:j]
	}
	ann, err := UnquotePath(rest)
	if err != nil {
		return FD{}, false
	}
	fd.Annotation = ann
	if strings.HasPrefix(ann, "/") {
		fd.Path = ann
		return fd, true
	}
	if i := strings.Index(ann, ":["); i > 0 && strings.HasSuffix(ann, "]") {
		fd.Proto = ann[:i]
		if n, err := strconv.ParseUint(ann[i+2:len(ann)-1], 10, 64); err == nil {
			fd.Inode = n
		}
		return fd, true
	}
	if i := strings.IndexByte(ann, ':'); i > 0 {
		fd.Proto = ann[:i]
	}
	return fd, true
}

// SockAddr is a socket address as strace decodes it.
type SockAddr struct {
	// Family is the address family as printed ("AF_INET", "AF_INET6",
	// "AF_UNIX", "AF_UNSPEC", …).
	Family string
	// Addr is the IP address (INET families).
	Addr netip.Addr
	// Port is the port (INET families), or -1 when none was printed.
	Port int
	// Path is the AF_UNIX path; Abstract reports an abstract name
	// (`sun_path=@"…"`, Path then holds the name without the @).
	Path     string
	Abstract bool
}

// SockAddr finds the first socket address (`{sa_family=…}`) in the
// argument, also inside a msghdr (`{msg_name={sa_family=…}, …}`).
func (a Arg) SockAddr() (SockAddr, bool) {
	s := string(a)
	i := strings.Index(s, "{sa_family=")
	if i < 0 {
		return SockAddr{}, false
	}
	end := matchClose(s, i)
	if end < 0 {
		return SockAddr{}, false
	}
	st := Arg(s[i : end+1])
	sa := SockAddr{Port: -1}
	fam, _ := st.Field("sa_family")
	sa.Family = string(fam)
	for _, f := range splitTop(string(st)[1 : len(st)-1]) {
		k, v, _ := strings.Cut(string(f), "=")
		switch {
		case k == "sin_port" || k == "sin6_port":
			if p, ok := htons(v); ok {
				sa.Port = p
			}
		case k == "sin_addr":
			if q, ok := strings.CutPrefix(v, "inet_addr("); ok && strings.HasSuffix(q, ")") {
				if str, ok := Arg(q[:len(q)-1]).Str(); ok {
					if ip, err := netip.ParseAddr(str); err == nil {
						sa.Addr = ip
					}
				}
			}
		case strings.HasPrefix(string(f), "inet_pton("):
			parts := splitTop(string(f)[len("inet_pton(") : len(f)-1])
			if len(parts) >= 2 {
				if str, ok := parts[1].Str(); ok {
					if ip, err := netip.ParseAddr(str); err == nil {
						sa.Addr = ip
					}
				}
			}
		case k == "sun_path":
			if strings.HasPrefix(v, "@") {
				sa.Abstract = true
				v = v[1:]
			}
			if str, ok := Arg(v).Str(); ok {
				sa.Path = str
			}
		}
	}
	return sa, true
}

// htons reads `htons(N)`.
func htons(v string) (int, bool) {
	q, ok := strings.CutPrefix(v, "htons(")
	if !ok || !strings.HasSuffix(q, ")") {
		return 0, false
	}
	n, ok := parseInt(q[:len(q)-1])
	if !ok || n < 0 || n > 65535 {
		return 0, false
	}
	return int(n), true
}

// String renders the address as host:port, or the UNIX path.
func (sa SockAddr) String() string {
	switch {
	case sa.Family == "AF_UNIX" && sa.Abstract:
		return "@" + sa.Path
	case sa.Family == "AF_UNIX":
		return sa.Path
	case sa.Addr.IsValid() && sa.Port >= 0:
		return netip.AddrPortFrom(sa.Addr, uint16(sa.Port)).String()
	case sa.Addr.IsValid():
		return sa.Addr.String()
	}
	return fmt.Sprintf("%s port %d", sa.Family, sa.Port)
}

// matchClose returns the index of the bracket closing the one at s[i], or
// -1.
func matchClose(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch c := s[j]; c {
		case '"':
			k := skipString(s, j)
			if k < 0 {
				return -1
			}
			j = k - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// QuotedPrefix is the string literal s starts with, with strace's "..."
// after it when cut short; false when s does not start with a whole one.
func QuotedPrefix(s string) (Arg, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", false
	}
	j := skipString(s, 0)
	if j < 0 {
		return "", false
	}
	return Arg(s[:j]), true
}

// skipString returns the index just past the string literal starting at
// s[i] (including a "..." truncation mark), or -1 if it does not end.
func skipString(s string, i int) int {
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			n++
		}
		j++
		if n%2 == 0 {
			if strings.HasPrefix(s[j:], "...") {
				j += 3
			}
			return j
		}
	}
}

// splitTop splits s at the commas outside quotes, brackets, -y
// annotations and comments, trimming the spaces after each comma.
func splitTop(s string) []Arg {
	if s == "" {
		return nil
	}
	n := 1
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			n++
		}
	}
	out := make([]Arg, 0, n)
	args, _, ok := scanArgs(s, out, false)
	if !ok {
		return append(out[:0], Arg(s))
	}
	return args
}

// scanArgs scans s, appending the top-level arguments to out. With call
// set, the scan stops at the unmatched ')' that closes a call's argument
// list; end is then the index of that ')', or -1 when the text ended first
// (an unfinished call). ok is false for text that does not scan (an
// unterminated string, annotation or comment, or unbalanced brackets).
func scanArgs(s string, out []Arg, call bool) (args []Arg, end int, ok bool) {
	depth, start, base := 0, 0, len(out)
	finish := func(j int) []Arg {
		seg := strings.TrimSpace(s[start:j])
		if seg == "" && len(out) == base {
			return out
		}
		return append(out, Arg(seg))
	}
	for j := 0; j < len(s); j++ {
		switch c := s[j]; c {
		case '"':
			k := skipString(s, j)
			if k < 0 {
				return out, -1, false
			}
			j = k - 1
		case '<':
			// A -y annotation follows a descriptor number or AT_FDCWD; "<<"
			// is a shift in printed flags (B2000000<<IBSHIFT).
			if j > 0 && (s[j-1] >= '0' && s[j-1] <= '9' || s[j-1] == 'D') && !strings.HasPrefix(s[j+1:], "<") {
				k := skipAnnotation(s, j)
				if k < 0 {
					return out, -1, false
				}
				j = k - 1
			}
		case '/':
			if j+1 < len(s) && s[j+1] == '*' {
				k := strings.Index(s[j+2:], "*/")
				if k < 0 {
					return out, -1, false
				}
				j += k + 3
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				if call && c == ')' {
					return finish(j), j, true
				}
				return out, -1, false
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, Arg(strings.TrimSpace(s[start:j])))
				start = j + 1
			}
		}
	}
	if depth != 0 {
		return out, -1, false
	}
	return finish(len(s)), -1, true
}

// skipAnnotation returns the index just past the -y annotation starting
// with the '<' at s[i]. Inside it, `->` and `=>` do not close it, and a
// nested `<char 1:3>` (from -yy) is skipped.
func skipAnnotation(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '<':
			k := strings.IndexByte(s[j:], '>')
			if k < 0 {
				return -1
			}
			j += k
		case '>':
			if s[j-1] == '-' || s[j-1] == '=' {
				continue
			}
			return j + 1
		}
	}
	return -1
}
