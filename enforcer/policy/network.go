package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

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
