package attribute

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Layer names what refused a call.
type Layer string

// The layers. Only Filesystem and Network refusals can become grants.
const (
	Filesystem Layer = "filesystem"
	Network    Layer = "network"
	Fixed      Layer = "fixed"
	Limit      Layer = "limit"
	Other      Layer = "other"
)

// Grantable reports whether a policy can lift a refusal of this layer.
func (l Layer) Grantable() bool { return l == Filesystem || l == Network }

// Right is a Landlock access right, spelled as the kernel's audit records
// spell their blockers, so a refusal compares directly with a record. A
// refusal lists every right the call needs; a record's blockers are only
// the missing ones, a subset of them. Package landlock names them and says
// which section grants each.
type Right = landlock.Right

// Need is what one object needs: sections of a policy, and the rights they
// stand for, on one path.
type Need struct {
	Path     string
	Sections []policy.Section
	Rights   []Right
}

// NewNeed is what path needs for rights: the rights, and the sections that
// grant them (landlock.Right.Section) in the order of the rights.
func NewNeed(path string, rights ...Right) Need {
	n := Need{Path: path, Rights: rights}
	for _, r := range rights {
		if s := policy.Section(r.Section()); !slices.Contains(n.Sections, s) {
			n.Sections = append(n.Sections, s)
		}
	}
	return n
}

// NetNeed is one network rule a refusal needs.
type NetNeed struct {
	// Section is policy.Bind or policy.Connect.
	Section policy.Section
	// Addr is the destination (connect) or local (bind) address, if printed.
	Addr netip.Addr
	// Port is the port; 0 for a bind to a kernel-chosen port.
	Port      int
	Transport policy.Transport
	Right     Right
}

// Refusal is one refused call and what it proves.
type Refusal struct {
	// Call is the refused call.
	Call *strace.Call
	// Layer is what refused it; only Filesystem and Network are grantable.
	Layer Layer
	// Op is the operation: read, write, create, delete, rename, link,
	// execute, truncate, ioctl, bind, connect, send, or the limit's call.
	Op string
	// Needs lists each object with its sections (Filesystem).
	Needs []Need
	// Paths, Sections and Rights summarise Needs: every object, and the
	// union of sections (in the policy's canonical order) and rights.
	Paths    []string
	Sections []policy.Section
	Rights   []Right
	// Net lists the network rules (Network); Addr, Port and Transport are
	// its first, and Port is -1 when there is none.
	Net       []NetNeed
	Addr      netip.Addr
	Port      int
	Transport policy.Transport
	// Limit is the limit hit (Limit).
	Limit policy.LimitKey
	// Errno is the call's error.
	Errno string
	// Detail adds what the layer rests on (an ioctl request, a family).
	Detail string
	// Reason says in one sentence why the refusal is in its layer, or why it
	// can never be granted.
	Reason string
}

// String renders the refusal on one line.
func (r *Refusal) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Layer, r.Op, r.Errno)
	for _, n := range r.Needs {
		fmt.Fprintf(&b, " %s%v", n.Path, n.Sections)
	}
	for _, n := range r.Net {
		fmt.Fprintf(&b, " [%s] %s:%d %s", n.Section, n.Addr, n.Port, n.Transport)
	}
	if r.Limit != "" {
		fmt.Fprintf(&b, " %s", r.Limit)
	}
	if r.Call != nil {
		fmt.Fprintf(&b, " (line %d, pid %d)", r.Call.Line, r.Call.PID)
	}
	return b.String()
}

// Add appends needs to a filesystem refusal and recomputes Paths, Sections
// and Rights (package control adds an executable's interpreter this way).
func (r *Refusal) Add(needs ...Need) {
	r.Needs = append(r.Needs, needs...)
	r.Paths, r.Sections, r.Rights = nil, nil, nil
	r.summarise()
}

// Policy returns the literal grant a confirmed refusal proves: each need's
// sections on its path, and each network rule as written (a connect names
// its address, or every host when none was printed). A refusal of a layer
// no policy lifts grants nothing. Generalisation (a directory for its
// files, the loopback wildcards of the reference's network stage) is the
// search's business, not this.
func (r *Refusal) Policy() *policy.Policy {
	p := policy.Union()
	if !r.Layer.Grantable() {
		return p
	}
	for _, n := range r.Needs {
		if p.FS[n.Path] == nil {
			p.FS[n.Path] = map[policy.Section]bool{}
		}
		for _, s := range n.Sections {
			p.FS[n.Path][s] = true
		}
	}
	for _, n := range r.Net {
		switch n.Section {
		case policy.Bind:
			b := policy.BindRule{Port: n.Port, Transport: n.Transport}
			if !slices.Contains(p.Bind, b) {
				p.Bind = append(p.Bind, b)
			}
		case policy.Connect:
			host := "*"
			if n.Addr.IsValid() {
				host = n.Addr.Unmap().String()
			}
			c := policy.ConnectRule{Host: host, Port: n.Port, Transport: n.Transport}
			if !slices.Contains(p.Connect, c) {
				p.Connect = append(p.Connect, c)
			}
		}
	}
	return p
}

// summarise fills Paths, Sections and Rights from Needs.
func (r *Refusal) summarise() {
	var secs []policy.Section
	for _, n := range r.Needs {
		if !slices.Contains(r.Paths, n.Path) {
			r.Paths = append(r.Paths, n.Path)
		}
		secs = append(secs, n.Sections...)
		r.Rights = uniqRights(append(r.Rights, n.Rights...))
	}
	r.Sections = sortSections(secs...)
}

func mergeNeeds(a, b Need) Need {
	return Need{Path: a.Path, Sections: sortSections(append(slices.Clone(a.Sections), b.Sections...)...),
		Rights: uniqRights(append(slices.Clone(a.Rights), b.Rights...))}
}

func uniqRights(rs []Right) []Right {
	var out []Right
	for _, r := range rs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// sortSections returns the distinct sections in the policy's canonical
// order (filesystem sections first, then connect, bind).
func sortSections(ss ...policy.Section) []policy.Section {
	order := append(slices.Clone(policy.FilesystemSections), policy.Connect, policy.Bind)
	var out []policy.Section
	for _, o := range order {
		if slices.Contains(ss, o) {
			out = append(out, o)
		}
	}
	return out
}

// sortedNeed is NewNeed with the sections in the policy's canonical order.
func sortedNeed(p string, rights ...Right) Need {
	n := NewNeed(p, rights...)
	n.Sections = sortSections(n.Sections...)
	return n
}
