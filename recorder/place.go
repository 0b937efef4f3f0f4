package recorder

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// place builds the policy from the collected needs with the pruner's own
// rules, and fills the record's grants, widenings and refusals to place.
func (c *collected) place() *policy.Policy {
	env := c.env()
	obs := make([]placement.Observation, len(c.sightings))
	var executed []string
	for i, s := range c.sightings {
		obs[i] = s.o
		if s.o.Section == policy.Execute {
			executed = append(executed, s.o.Path)
		}
	}
	grants, reports := placement.Grants(obs, env)
	p := &policy.Policy{}
	placement.Add(p, grants)
	p, narrowed := placement.NarrowExecute(p, nil, executed, env)
	p, _ = placement.Compact(p, nil, placement.DefaultThreshold, env)
	// The hierarchy rule, as the pruner prepares every candidate: the
	// enforcer refuses a row narrower than an ancestor's.
	if q, err := p.NormaliseHierarchy(); err == nil {
		p = q
	} else {
		c.record.NotPlaced = append(c.record.NotPlaced, "the hierarchy rule: "+err.Error())
	}
	for _, r := range append(reports, narrowed...) {
		c.record.NotPlaced = append(c.record.NotPlaced, r.String())
	}
	for _, g := range grants {
		if g.Widened {
			c.record.Widenings = append(c.record.Widenings, Widening{Object: g.Object, Row: fmt.Sprintf("[%s] %s", g.Section, g.Path), Reason: c.widenedBecause(g)})
		}
	}
	c.moveSections(p)
	c.network(p)
	c.grantCalls(p)
	return p
}

// moveSections gives the source directory of each move between
// directories the destination's sections (a moved file must not gain
// rights, or Landlock refuses the move); [execute] is listed, not granted.
func (c *collected) moveSections(p *policy.Policy) {
	for _, m := range c.moves {
		src, dst := coveringRow(p, m[0]), coveringRow(p, m[1])
		if src == "" || dst == "" {
			continue
		}
		for sec, on := range p.FS[dst] {
			switch {
			case !on || p.FS[src][sec]:
			case sec == policy.Execute:
				c.record.NotPlaced = append(c.record.NotPlaced, fmt.Sprintf("[execute] move %s → %s: listed, not granted to the source", m[0], m[1]))
			default:
				p.FS[src][sec] = true
			}
		}
	}
}

// coveringRow is the deepest row of p that is q or an ancestor of q.
func coveringRow(p *policy.Policy, q string) string {
	best := ""
	for r := range p.FS {
		if (r == q || policy.Beneath(q, r)) && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// widenedBecause says why a grant landed on another path than its object.
func (c *collected) widenedBecause(g placement.Grant) string {
	switch _, existed := c.existed[g.Object]; {
	case g.Comment != "":
		return g.Comment
	case !existed:
		return "no session found it before it ran: granted on the nearest directory that existed before (never / nor a top-level directory)"
	case placement.IsReadClass(g.Section):
		return "a file outside the fine-grained roots is granted on its directory"
	}
	return "placed by the layer pruner's rules"
}

// network adds the network rules: loopback through the pruner's
// NetworkRules (a loopback server the sessions ran becomes the loopback
// wildcard), an endpoint whose TLS ClientHello named its server by that
// name, every other endpoint held by its address with a comment.
func (c *collected) network(p *policy.Policy) {
	net := placement.NetworkRules(c.net, c.served, landlock.ABIUDP)
	p.Connect, p.Bind = net.Connect, net.Bind
	c.record.NotPlaced = append(c.record.NotPlaced, net.Reports...)
	seen := map[string]bool{}
	for i, n := range c.net {
		if n.Section != policy.Connect || !n.Addr.IsValid() || n.Port <= 0 || placement.Loopback(n.Addr) {
			continue
		}
		addr := n.Addr.Unmap().String()
		r := policy.ConnectRule{Host: addr, Port: n.Port, Transport: n.Transport,
			Comment: "held by address: a session connected here; no server name was recorded for it"}
		name := c.netNames[i]
		if name != "" {
			r.Host, r.Comment = name, "the server name of the TLS ClientHello a session sent to "+addr
		}
		if seen[r.String()] {
			continue
		}
		seen[r.String()] = true
		if name != "" {
			c.record.ServerNames = append(c.record.ServerNames, fmt.Sprintf("%s: %s (%s)", r.String(), addr, c.netCalls[i]))
		}
		p.Connect = append(p.Connect, r)
	}
}

// grantCalls lists, for every filesystem row, the first calls behind it,
// and for every network row the calls of its section and transport.
func (c *collected) grantCalls(p *policy.Policy) {
	paths := make([]string, 0, len(p.FS))
	for q := range p.FS {
		paths = append(paths, q)
	}
	sort.Strings(paths)
	for _, q := range paths {
		for _, sec := range policy.FilesystemSections {
			if !p.FS[q][sec] {
				continue
			}
			g := GrantWhy{Row: fmt.Sprintf("[%s] %s", sec, q), Calls: []string{}}
			for _, s := range c.sightings {
				if s.o.Section == sec && (s.o.Path == q || policy.Beneath(s.o.Path, q)) && len(g.Calls) < maxCalls && !slices.Contains(g.Calls, s.call) {
					g.Calls = append(g.Calls, s.call)
				}
			}
			c.record.Grants = append(c.record.Grants, g)
		}
	}
	for _, r := range p.Connect {
		c.netGrant("connect", r.String(), policy.Connect, r.Transport)
	}
	for _, r := range p.Bind {
		c.netGrant("bind", r.String(), policy.Bind, r.Transport)
	}
}

func (c *collected) netGrant(sec, row string, s policy.Section, tr policy.Transport) {
	g := GrantWhy{Row: fmt.Sprintf("[%s] %s", sec, row), Calls: []string{}}
	for i, n := range c.net {
		if n.Section == s && n.Transport == tr && len(g.Calls) < maxCalls && !slices.Contains(g.Calls, c.netCalls[i]) {
			g.Calls = append(g.Calls, c.netCalls[i])
		}
	}
	c.record.Grants = append(c.record.Grants, g)
}

// createdReads are the [read] and [execute] rows on a path no session
// found before it ran.
func (c *collected) createdReads(p *policy.Policy) []string {
	var out []string
	for q, secs := range p.FS {
		if _, ok := c.existed[q]; ok {
			continue
		}
		for _, s := range []policy.Section{policy.Read, policy.Execute} {
			if secs[s] {
				out = append(out, fmt.Sprintf("[%s] %s: no session found it before it ran", s, q))
			}
		}
	}
	sort.Strings(out)
	return out
}

// header is the policy's leading comment: that the recorded program ran
// unsandboxed, how many sessions the policy covers, and INCOMPLETE when a
// need was not granted.
func header(sessions int, r *Record) []string {
	h := []string{
		"The recorded program ran UNSANDBOXED (inside a throwaway guest) while these sessions were recorded.",
		fmt.Sprintf("lockstep record generate: this policy covers %d session(s): %v.", sessions, r.Sessions),
	}
	if len(r.ServerNames) > 0 {
		h = append(h, "A [connect] row names a host by its TLS server name: Landlock grants its port alone; holding the host too needs a resolver (a proxy or firewall that resolves the name).")
	}
	if r.Limits != nil {
		h = append(h, fmt.Sprintf("[limits] from %d sampled session(s) with the layer pruner's margins; %s.", len(r.Limits.Measurements), r.Limits.MemMB))
	}
	if n := len(r.Ungrantable) + len(r.NotPlaced); n > 0 {
		h = append(h, fmt.Sprintf("INCOMPLETE: %d access(es) no policy grants or no rule placed; record.json lists them.", n))
		for _, u := range r.Ungrantable {
			h = append(h, fmt.Sprintf("not grantable (%s): %s", u.Layer, u.Reason))
		}
		for _, s := range r.NotPlaced {
			h = append(h, "not placed: "+s)
		}
	}
	return h
}

// judge sets the record's status 4 or 6 (5 is finish's).
func (c *collected) judge(p *policy.Policy) {
	r := c.record
	if bad := c.createdReads(p); len(bad) > 0 {
		r.Status = StatusCreatedRead
		r.Why = append(r.Why, bad...)
	}
	if len(r.Ungrantable)+len(r.NotPlaced) > 0 && r.Status == StatusOK {
		r.Status = StatusIncomplete
		r.Why = append(r.Why, "INCOMPLETE: an access no policy grants, or a need no rule placed")
	}
}

// finish refuses a policy lockstep policy check refuses (status 5) and writes it and its
// record into the recording.
func finish(rec string, p *policy.Policy, r *Record) (*Generated, error) {
	out := p.Render()
	if _, err := policy.Parse(PolicyFile, out); err != nil {
		r.Status = StatusRefused
		r.Why = append(r.Why, "lockstep policy check refuses the result: "+err.Error())
	}
	r.PolicyHash = p.Hash()
	b, err := marshal(r)
	if err != nil {
		return nil, err
	}
	if err := safefile.WriteFile(filepath.Join(rec, PolicyFile), out, 0o644); err != nil {
		return nil, err
	}
	if err := safefile.WriteFile(filepath.Join(rec, RecordFile), b, 0o644); err != nil {
		return nil, err
	}
	return &Generated{Policy: p, Record: r}, nil
}
