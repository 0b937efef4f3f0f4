package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// escapeComment writes every byte outside printable ASCII, and "#", as \xHH
// so a comment can never end a line or start a new one.
func escapeComment(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '#' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '#' {
			fmt.Fprintf(&b, `\x%02x`, c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func writeComment(b *strings.Builder, c string) {
	if c == "" {
		return
	}
	for _, l := range strings.Split(c, "\n") {
		writeCommentLine(b, l)
	}
}

func writeCommentLine(b *strings.Builder, l string) {
	if l = trim(escapeComment(l)); l == "" {
		b.WriteString("#\n")
	} else {
		b.WriteString("# " + l + "\n")
	}
}

// Render writes the policy in canonical form: the header comment lines, then
// the filesystem sections in the order of FilesystemSections with paths
// sorted (a path's comment once, above its first row), then [connect] and
// [bind] with rules sorted (host, port, transport; port, transport), each
// rule's comment above it, then [limits] in the order of LimitKeys. Blocks
// are separated by one blank line; lines end in LF; the file ends in a
// newline. An empty policy renders as no bytes. Render(Parse(Render(p))) is
// Render(p), and two policies that grant the same render their rules alike.
func (p *Policy) Render() []byte {
	var blocks []string
	var b strings.Builder
	if len(p.Header) > 0 {
		for _, h := range p.Header {
			for _, l := range strings.Split(h, "\n") {
				writeCommentLine(&b, l)
			}
		}
		blocks = append(blocks, b.String())
	}
	written := map[string]bool{}
	bySection := p.pathsBySection()
	for _, s := range FilesystemSections {
		paths := bySection[s]
		if len(paths) == 0 {
			continue
		}
		b.Reset()
		b.WriteString("[" + string(s) + "]\n")
		for _, path := range paths {
			if !written[path] {
				writeComment(&b, p.Comments[path])
				written[path] = true
			}
			b.WriteString(path + "\n")
		}
		blocks = append(blocks, b.String())
	}
	if len(p.Connect) > 0 {
		b.Reset()
		b.WriteString("[connect]\n")
		for _, r := range sortedConnect(p.Connect) {
			writeComment(&b, r.Comment)
			b.WriteString(r.String() + "\n")
		}
		blocks = append(blocks, b.String())
	}
	if len(p.Bind) > 0 {
		b.Reset()
		b.WriteString("[bind]\n")
		for _, r := range sortedBind(p.Bind) {
			writeComment(&b, r.Comment)
			b.WriteString(r.String() + "\n")
		}
		blocks = append(blocks, b.String())
	}
	if len(p.Limits) > 0 {
		b.Reset()
		b.WriteString("[limits]\n")
		for _, k := range LimitKeys {
			if l, ok := p.Limits[k]; ok {
				b.WriteString(string(k) + "=" + l.Format(k) + "\n")
			}
		}
		blocks = append(blocks, b.String())
	}
	return []byte(strings.Join(blocks, "\n"))
}

// Format writes a limit value as a .cfg file spells it: "0" when off; a
// timeout as seconds with three decimals only when it has a fraction.
func (l Limit) Format(k LimitKey) string {
	switch {
	case l.Off:
		return "0"
	case k == Timeout && l.Value%1000 != 0:
		return fmt.Sprintf("%d.%03d", l.Value/1000, l.Value%1000)
	case k == Timeout:
		return strconv.FormatInt(l.Value/1000, 10)
	}
	return strconv.FormatInt(l.Value, 10)
}

// String renders the rule as its canonical row, e.g. "allow 127.0.0.1:*",
// "allow [::1]:443", "allow api.example.org:443 udp". A rule for every port is
// written with ":*"; tcp is not written.
func (r ConnectRule) String() string {
	host := r.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := "*"
	if r.Port != 0 {
		port = strconv.Itoa(r.Port)
	}
	s := "allow " + host + ":" + port
	if r.Transport == UDP {
		s += " udp"
	}
	return s
}

// String renders the rule as its canonical row, e.g. "allow 0", "allow 5000 udp".
func (r BindRule) String() string {
	s := "allow " + strconv.Itoa(r.Port)
	if r.Transport == UDP {
		s += " udp"
	}
	return s
}

func transportRank(t Transport) int {
	if t == UDP {
		return 1
	}
	return 0
}

func sortedConnect(rs []ConnectRule) []ConnectRule {
	out := append([]ConnectRule(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return transportRank(a.Transport) < transportRank(b.Transport)
	})
	return out
}

func sortedBind(rs []BindRule) []BindRule {
	out := append([]BindRule(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Port != out[j].Port {
			return out[i].Port < out[j].Port
		}
		return transportRank(out[i].Transport) < transportRank(out[j].Transport)
	})
	return out
}

// pathsBySection lists the paths of every section, each list sorted, in
// one pass over the policy.
func (p *Policy) pathsBySection() map[Section][]string {
	out := map[Section][]string{}
	for path, secs := range p.FS {
		for s, ok := range secs {
			if ok {
				out[s] = append(out[s], path)
			}
		}
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out
}

// Paths returns the paths holding section s, sorted.
func (p *Policy) Paths(s Section) []string {
	var out []string
	for path, secs := range p.FS {
		if secs[s] {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out
}

// Rules returns a copy of the policy without comments or header: what it grants.
func (p *Policy) Rules() *Policy {
	q := p.Clone()
	q.Header = nil
	q.Comments = map[string]string{}
	for i := range q.Connect {
		q.Connect[i].Comment = ""
	}
	for i := range q.Bind {
		q.Bind[i].Comment = ""
	}
	return q
}

// Hash is "sha256:" and the hex SHA-256 of the canonical rendering of the
// rules alone: comments and header are excluded, so two files that grant the
// same hash alike. (A record vouching for a file hashes its raw bytes
// instead: FileSHA256.)
func (p *Policy) Hash() string {
	// A shallow copy: Render reads FS and Limits and never changes them.
	q := &Policy{FS: p.FS, Limits: p.Limits}
	for _, r := range p.Connect {
		r.Comment = ""
		q.Connect = append(q.Connect, r)
	}
	for _, r := range p.Bind {
		r.Comment = ""
		q.Bind = append(q.Bind, r)
	}
	return FileSHA256(q.Render())
}

// FileSHA256 is "sha256:" and the hex SHA-256 of data, raw bytes as read.
func FileSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Clone returns a deep copy of p (nil for nil).
func (p *Policy) Clone() *Policy {
	if p == nil {
		return nil
	}
	q := newPolicy()
	q.FS = make(map[string]map[Section]bool, len(p.FS))
	for path, secs := range p.FS {
		m := make(map[Section]bool, len(secs))
		for s, ok := range secs {
			if ok {
				m[s] = true
			}
		}
		q.FS[path] = m
	}
	q.Connect = append([]ConnectRule(nil), p.Connect...)
	q.Bind = append([]BindRule(nil), p.Bind...)
	for k, v := range p.Limits {
		q.Limits[k] = v
	}
	for k, v := range p.Comments {
		q.Comments[k] = v
	}
	q.Header = append([]string(nil), p.Header...)
	return q
}

// Equal reports whether p and q hold the same grants, limits, comments and
// header. Network rules compare as sets (order does not matter); a path with
// no sections counts as absent, and so does its comment.
func (p *Policy) Equal(q *Policy) bool {
	if p == nil || q == nil {
		return p == q
	}
	pf, qf := p.fsSets(), q.fsSets()
	if len(pf) != len(qf) {
		return false
	}
	for path, l := range pf {
		if qf[path] != l || p.Comments[path] != q.Comments[path] {
			return false
		}
	}
	if !slices.Equal(sortedConnect(p.Connect), sortedConnect(q.Connect)) ||
		!slices.Equal(sortedBind(p.Bind), sortedBind(q.Bind)) ||
		!maps.Equal(p.Limits, q.Limits) {
		return false
	}
	return slices.Equal(p.Header, q.Header)
}

// fsSets maps each path holding a section to a string naming its sections.
func (p *Policy) fsSets() map[string]string {
	out := map[string]string{}
	for path, secs := range p.FS {
		var b strings.Builder
		for _, s := range FilesystemSections {
			if secs[s] {
				b.WriteString(string(s) + " ")
			}
		}
		if b.Len() > 0 {
			out[path] = b.String()
		}
	}
	return out
}

// Validate checks what Parse would have refused in a policy built in code:
// every path absolute, normal and carriable, known sections only, network
// rules and limits in range. It returns an ErrorList (File "policy", Line 0)
// or nil.
func (p *Policy) Validate() error {
	var errs ErrorList
	add := func(format string, a ...any) {
		errs = append(errs, &Error{File: "policy", Msg: fmt.Sprintf(format, a...)})
	}
	fsSection := map[Section]bool{}
	for _, s := range FilesystemSections {
		fsSection[s] = true
	}
	for path, secs := range p.FS {
		if msg := checkPath(path); msg != "" {
			add("%s", msg)
		}
		for s, ok := range secs {
			if ok && !fsSection[s] {
				add("path %q is in [%s], which is not a filesystem section", path, s)
			}
		}
	}
	for _, r := range p.Connect {
		if r.Transport != TCP && r.Transport != UDP {
			add("[connect] rule %+v has transport %q", r, r.Transport)
			continue
		}
		target := strings.TrimSuffix(strings.TrimPrefix(r.String(), "allow "), " udp")
		got, msg := parseConnectTarget(target)
		if msg != "" {
			add("[connect] %s", msg)
		} else if got.Host != r.Host {
			add("[connect] host %q is not canonical; want %q", r.Host, got.Host)
		}
	}
	for _, r := range p.Bind {
		if r.Port < 0 || r.Port > 65535 || (r.Transport != TCP && r.Transport != UDP) {
			add("[bind] rule %+v is not port 0-65535 over tcp or udp", r)
		}
	}
	for k, l := range p.Limits {
		if _, err := ParseLimit(k, l.Format(k)); err != nil || l.Value < 0 {
			add("[limits] %s=%d is out of range", k, l.Value)
		}
	}
	return errs.err()
}
