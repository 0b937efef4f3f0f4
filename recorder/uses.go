package recorder

import (
	"net/netip"
	"slices"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
)

// Use is one successful call of a session and what it needs under
// Landlock (attribute.Uses, taken in the guest where the paths are the
// session's).
type Use struct {
	// Line is the call's line in the trace; Call the call as strace wrote it.
	Line int    `json:"line"`
	Call string `json:"call"`
	// PID and TGID are the calling thread and process.
	PID  int `json:"pid"`
	TGID int `json:"tgid"`
	// Layer is attribute's: filesystem and network can be granted, fixed
	// and other never.
	Layer  string `json:"layer"`
	Op     string `json:"op"`
	Reason string `json:"reason,omitempty"`
	Needs  []Need `json:"needs,omitempty"`
	// Paths are the objects of a call that needs no section (a fixed
	// rule's device ioctl).
	Paths []string `json:"paths,omitempty"`
	Net   []Net    `json:"net,omitempty"`
}

// Need is one object's sections and rights.
type Need struct {
	Path     string   `json:"path"`
	Sections []string `json:"sections"`
	Rights   []string `json:"rights"`
}

// Net is one network rule a call needs.
type Net struct {
	Section   string     `json:"section"`
	Addr      netip.Addr `json:"addr"`
	Port      int        `json:"port"`
	Transport string     `json:"transport"`
	// Name is the server name of the TLS ClientHello written on a
	// connect's socket ("" none seen).
	Name string `json:"name,omitempty"`
}

// usesOf converts attribute's view of a session into Uses, naming each
// connect by its socket's TLS server name (names, from serverNames).
func usesOf(rs []*attribute.Refusal, names map[uint64]string) []Use {
	out := []Use{}
	for _, r := range rs {
		u := Use{Layer: string(r.Layer), Op: r.Op, Reason: r.Reason}
		if len(r.Needs) == 0 {
			u.Paths = r.Paths
		}
		if r.Call != nil {
			u.Line, u.Call, u.PID, u.TGID = r.Call.Line, r.Call.String(), r.Call.PID, r.Call.TGID
		}
		for _, n := range r.Needs {
			nd := Need{Path: n.Path}
			for _, s := range n.Sections {
				nd.Sections = append(nd.Sections, string(s))
			}
			for _, rt := range n.Rights {
				nd.Rights = append(nd.Rights, string(rt))
			}
			u.Needs = append(u.Needs, nd)
		}
		for _, n := range r.Net {
			u.Net = append(u.Net, Net{Section: string(n.Section), Addr: n.Addr, Port: n.Port, Transport: string(n.Transport),
				Name: names[connectInode(r.Call)]})
		}
		out = append(out, u)
	}
	return out
}

// Objects are every path u names.
func (u Use) Objects() []string {
	out := append([]string(nil), u.Paths...)
	for _, n := range u.Needs {
		if !slices.Contains(out, n.Path) {
			out = append(out, n.Path)
		}
	}
	return out
}

// grantable reports whether a policy can grant what u needs.
func (u Use) grantable() bool {
	return u.Layer == string(attribute.Filesystem) || u.Layer == string(attribute.Network)
}

// section is a Need's section as the policy package types it.
func section(s string) policy.Section { return policy.Section(s) }
