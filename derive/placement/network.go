package placement

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
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

// NetworkRules turns confirmed network refusals into rules (Landlock sees
// ports only): a refused loopback connect to a port a
// process of the run served becomes the loopback wildcard of its family
// (allow 127.0.0.1:*, allow [::1], or allow localhost when both need it),
// any other loopback connect an exact rule; a refused bind becomes allow
// <port>. External destinations are never granted. A UDP rule naming a port
// on a kernel below landlock.ABIUDP is reported, not granted.
func NetworkRules(needs []NetNeed, served []Endpoint, abi int) NetResult {
	nr := &netRules{abi: abi, served: map[Endpoint]bool{}, wild: map[policy.Transport]map[int]bool{},
		exact: map[string]policy.ConnectRule{}, binds: map[policy.BindRule]bool{}, ext: map[string]bool{}}
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
	return nr.result()
}

// netRules is what NetworkRules gathered so far.
type netRules struct {
	abi    int
	served map[Endpoint]bool
	wild   map[policy.Transport]map[int]bool // transport → family 4/6
	exact  map[string]policy.ConnectRule
	binds  map[policy.BindRule]bool
	ext    map[string]bool
	res    NetResult
}

func (nr *netRules) report(format string, args ...any) {
	nr.res.Reports = append(nr.res.Reports, fmt.Sprintf(format, args...))
}

// family is 4 or 6, a's address family.
func family(a netip.Addr) int {
	if a.Is6() {
		return 6
	}
	return 4
}

// connect notes a refused connect: external, its family's loopback
// wildcard (a served port), or an exact rule.
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
	if tr == policy.UDP && nr.abi < landlock.ABIUDP {
		nr.report("connect %s:%d udp: a UDP port rule needs Landlock ABI %d, this kernel has %d", a, n.Port, landlock.ABIUDP, nr.abi)
		return
	}
	r := policy.ConnectRule{Host: a.String(), Port: n.Port, Transport: tr,
		Comment: "no process of the run bound that port; granted exactly"}
	nr.exact[r.String()] = r
}

// bind notes a refused bind of a loopback or unspecified address.
func (nr *netRules) bind(n NetNeed) {
	tr := n.Transport
	if n.Addr.IsValid() && !n.Addr.IsUnspecified() && !Loopback(n.Addr) {
		nr.report("bind %s:%d %s: not a loopback address", n.Addr, n.Port, tr)
		return
	}
	if tr == policy.UDP && n.Port != 0 && nr.abi < landlock.ABIUDP {
		nr.report("bind %d udp: a UDP port rule needs Landlock ABI %d, this kernel has %d", n.Port, landlock.ABIUDP, nr.abi)
		return
	}
	nr.binds[policy.BindRule{Port: n.Port, Transport: tr}] = true
}

// result is the rules, sorted: the wildcards, the exact connects they do
// not cover, the binds, the external destinations and the reports.
func (nr *netRules) result() NetResult {
	res := nr.res
	for _, tr := range []policy.Transport{policy.TCP, policy.UDP} {
		f := nr.wild[tr]
		switch {
		case f[4] && f[6]:
			res.Connect = append(res.Connect, policy.ConnectRule{Host: "localhost", Transport: tr})
		case f[4]:
			res.Connect = append(res.Connect, policy.ConnectRule{Host: "127.0.0.1", Transport: tr})
		case f[6]:
			res.Connect = append(res.Connect, policy.ConnectRule{Host: "::1", Transport: tr})
		}
	}
	var keys []string
	for k := range nr.exact {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := nr.exact[k]
		a, _ := netip.ParseAddr(r.Host)
		if w := nr.wild[r.Transport]; w[family(a)] || (w[4] && w[6]) {
			continue // covered by the wildcard
		}
		res.Connect = append(res.Connect, r)
	}
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
	return res
}
