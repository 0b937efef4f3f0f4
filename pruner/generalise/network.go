package generalise

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// NetNeed is one confirmed network refusal: a connect (or send) to Addr:Port,
// or a bind of Port on Addr.
type NetNeed struct {
	Section   policy.Section // policy.Connect or policy.Bind
	Addr      netip.Addr     // zero when strace printed none
	Port      int
	Transport policy.Transport
}

// Endpoint is a port some process of the run bound or listened on.
type Endpoint struct {
	Port      int
	Transport policy.Transport
}

// NetResult is what NetworkRules decided.
type NetResult struct {
	Connect []policy.ConnectRule
	Bind    []policy.BindRule
	// RefusedExternal lists non-loopback destinations as
	// "<addr>:<port> <transport>"; they are never granted.
	RefusedExternal []string
	Reports         []string
}

// Loopback reports whether a is 127.0.0.0/8, ::1, or IPv4-mapped loopback.
func Loopback(a netip.Addr) bool {
	return a.IsValid() && a.Unmap().IsLoopback()
}

// NetworkRules turns confirmed network refusals into rules (reference B.12,
// with Landlock's port-only view): a refused loopback connect to a port a
// process of the run served becomes the loopback wildcard of its family
// (allow 127.0.0.1:*, allow [::1], or allow localhost when both need it),
// any other loopback connect an exact rule; a refused bind becomes allow
// <port>. External destinations are never granted. A UDP rule naming a port
// on a kernel below ABI 10 is reported, not granted.
func NetworkRules(needs []NetNeed, served []Endpoint, abi int) NetResult {
	nr := &netRules{
		abi: abi, served: map[Endpoint]bool{}, wild: map[policy.Transport]map[int]bool{},
		exact: map[string]policy.ConnectRule{}, binds: map[policy.BindRule]bool{}, ext: map[string]bool{},
	}
	for _, e := range served {
		nr.served[e] = true
	}
	for _, n := range needs {
		tr := n.Transport
		if tr != policy.TCP && tr != policy.UDP {
			nr.report("%s %s:%d: unknown transport %q", n.Section, n.Addr, n.Port, tr)
			continue
		}
		switch n.Section {
		case policy.Connect:
			nr.connect(n)
		case policy.Bind:
			nr.bind(n)
		}
	}
	res := &nr.res
	res.Connect = append(nr.wildcards(), nr.exactRules()...)
	for b := range nr.binds {
		res.Bind = append(res.Bind, b)
	}
	sort.Slice(res.Bind, func(i, j int) bool {
		if res.Bind[i].Port != res.Bind[j].Port {
			return res.Bind[i].Port < res.Bind[j].Port
		}
		return res.Bind[i].Transport < res.Bind[j].Transport
	})
	for e := range nr.ext {
		res.RefusedExternal = append(res.RefusedExternal, e)
	}
	sort.Strings(res.RefusedExternal)
	sort.Strings(res.Reports)
	return *res
}

// netRules is NetworkRules' state while it reads the needs.
type netRules struct {
	abi    int
	served map[Endpoint]bool
	wild   map[policy.Transport]map[int]bool // transport → family 4/6
	exact  map[string]policy.ConnectRule
	binds  map[policy.BindRule]bool
	ext    map[string]bool
	res    NetResult
}

func (nr *netRules) report(format string, a ...any) {
	nr.res.Reports = append(nr.res.Reports, fmt.Sprintf(format, a...))
}

// connect takes a refused connect: an external destination is noted, a
// served loopback port asks for its family's wildcard, any other loopback
// port for an exact rule.
func (nr *netRules) connect(n NetNeed) {
	tr := n.Transport
	if !n.Addr.IsValid() || n.Port <= 0 {
		nr.report("connect with no address or port (%s:%d %s)", n.Addr, n.Port, tr)
		return
	}
	if !Loopback(n.Addr) {
		nr.ext[fmt.Sprintf("%s:%d %s", n.Addr, n.Port, tr)] = true
		return
	}
	a := n.Addr.Unmap()
	if nr.served[Endpoint{n.Port, tr}] {
		if nr.wild[tr] == nil {
			nr.wild[tr] = map[int]bool{}
		}
		nr.wild[tr][family(a)] = true
		return
	}
	if tr == policy.UDP && nr.abi < 10 {
		nr.report("connect %s:%d udp: a UDP port rule needs Landlock ABI 10, this kernel has %d", a, n.Port, nr.abi)
		return
	}
	r := policy.ConnectRule{Host: a.String(), Port: n.Port, Transport: tr,
		Comment: "no process of the run bound that port; granted exactly"}
	nr.exact[r.String()] = r
}

// bind takes a refused bind of a loopback or unspecified address.
func (nr *netRules) bind(n NetNeed) {
	tr := n.Transport
	if n.Addr.IsValid() && !n.Addr.IsUnspecified() && !Loopback(n.Addr) {
		nr.report("bind %s:%d %s: not a loopback address", n.Addr, n.Port, tr)
		return
	}
	if tr == policy.UDP && n.Port != 0 && nr.abi < 10 {
		nr.report("bind %d udp: a UDP port rule needs Landlock ABI 10, this kernel has %d", n.Port, nr.abi)
		return
	}
	nr.binds[policy.BindRule{Port: n.Port, Transport: tr}] = true
}

// wildcards are the loopback wildcard rules, TCP first: localhost when
// both families need one.
func (nr *netRules) wildcards() []policy.ConnectRule {
	var out []policy.ConnectRule
	for _, tr := range []policy.Transport{policy.TCP, policy.UDP} {
		f := nr.wild[tr]
		switch {
		case f[4] && f[6]:
			out = append(out, policy.ConnectRule{Host: "localhost", Transport: tr})
		case f[4]:
			out = append(out, policy.ConnectRule{Host: "127.0.0.1", Transport: tr})
		case f[6]:
			out = append(out, policy.ConnectRule{Host: "::1", Transport: tr})
		}
	}
	return out
}

// exactRules are the exact connect rules no wildcard covers, sorted.
func (nr *netRules) exactRules() []policy.ConnectRule {
	var keys []string
	for k := range nr.exact {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []policy.ConnectRule
	for _, k := range keys {
		r := nr.exact[k]
		a, _ := netip.ParseAddr(r.Host)
		w := nr.wild[r.Transport]
		if w[family(a)] || (w[4] && w[6]) {
			continue // covered by the wildcard
		}
		out = append(out, r)
	}
	return out
}

// family is 6 for an IPv6 address, 4 otherwise.
func family(a netip.Addr) int {
	if a.Is6() {
		return 6
	}
	return 4
}
