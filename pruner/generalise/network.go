package generalise

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

// NetworkRules turns confirmed network refusals into rules (Phobos's
// network rules, with Landlock's port-only view): a refused loopback connect to a port a
// process of the run served becomes the loopback wildcard of its family
// (allow 127.0.0.1:*, allow [::1], or allow localhost when both need it),
// any other loopback connect an exact rule; a refused bind becomes allow
// <port>. External destinations are never granted. A UDP rule naming a port
// on a kernel below landlock.ABIUDP is reported, not granted.
func NetworkRules(needs []NetNeed, served []Endpoint, abi int) NetResult {
	var res NetResult
	isServed := map[Endpoint]bool{}
	for _, e := range served {
		isServed[e] = true
	}
	wild := map[policy.Transport]map[int]bool{} // transport → family 4/6
	exact := map[string]policy.ConnectRule{}
	binds := map[policy.BindRule]bool{}
	ext := map[string]bool{}
	for _, n := range needs {
		tr := n.Transport
		if tr != policy.TCP && tr != policy.UDP {
			res.Reports = append(res.Reports, fmt.Sprintf("%s %s:%d: unknown transport %q", n.Section, n.Addr, n.Port, tr))
			continue
		}
		switch n.Section {
		case policy.Connect:
			if !n.Addr.IsValid() || n.Port <= 0 {
				res.Reports = append(res.Reports, fmt.Sprintf("connect with no address or port (%s:%d %s)", n.Addr, n.Port, tr))
				continue
			}
			if !Loopback(n.Addr) {
				ext[fmt.Sprintf("%s:%d %s", n.Addr, n.Port, tr)] = true
				continue
			}
			a := n.Addr.Unmap()
			fam := 4
			if a.Is6() {
				fam = 6
			}
			if isServed[Endpoint{n.Port, tr}] {
				if wild[tr] == nil {
					wild[tr] = map[int]bool{}
				}
				wild[tr][fam] = true
				continue
			}
			if tr == policy.UDP && abi < landlock.ABIUDP {
				res.Reports = append(res.Reports, fmt.Sprintf("connect %s:%d udp: a UDP port rule needs Landlock ABI %d, this kernel has %d", a, n.Port, landlock.ABIUDP, abi))
				continue
			}
			r := policy.ConnectRule{Host: a.String(), Port: n.Port, Transport: tr,
				Comment: "no process of the run bound that port; granted exactly"}
			exact[r.String()] = r
		case policy.Bind:
			if n.Addr.IsValid() && !n.Addr.IsUnspecified() && !Loopback(n.Addr) {
				res.Reports = append(res.Reports, fmt.Sprintf("bind %s:%d %s: not a loopback address", n.Addr, n.Port, tr))
				continue
			}
			if tr == policy.UDP && n.Port != 0 && abi < landlock.ABIUDP {
				res.Reports = append(res.Reports, fmt.Sprintf("bind %d udp: a UDP port rule needs Landlock ABI %d, this kernel has %d", n.Port, landlock.ABIUDP, abi))
				continue
			}
			binds[policy.BindRule{Port: n.Port, Transport: tr}] = true
		}
	}
	for _, tr := range []policy.Transport{policy.TCP, policy.UDP} {
		f := wild[tr]
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
	for k := range exact {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := exact[k]
		a, _ := netip.ParseAddr(r.Host)
		fam := 4
		if a.Is6() {
			fam = 6
		}
		if wild[r.Transport][fam] || (wild[r.Transport][4] && wild[r.Transport][6]) {
			continue // covered by the wildcard
		}
		res.Connect = append(res.Connect, r)
	}
	for b := range binds {
		res.Bind = append(res.Bind, b)
	}
	sort.Slice(res.Bind, func(i, j int) bool {
		if res.Bind[i].Port != res.Bind[j].Port {
			return res.Bind[i].Port < res.Bind[j].Port
		}
		return res.Bind[i].Transport < res.Bind[j].Transport
	})
	for e := range ext {
		res.RefusedExternal = append(res.RefusedExternal, e)
	}
	sort.Strings(res.RefusedExternal)
	sort.Strings(res.Reports)
	return res
}
