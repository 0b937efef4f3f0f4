package recorder

import (
	"fmt"
	"slices"
	"sort"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// DiffResult compares a policy with what a recording's sessions used.
type DiffResult struct {
	Policy string `json:"policy"`
	// Lacks are the needs the policy does not grant, each with the first
	// call behind it.
	Lacks []string `json:"lacks"`
	// Unused are the policy's rows no session used; Covered the rows no
	// session needed on their own because an ancestor row already grants
	// the same (never called unused).
	Unused  []string `json:"unused"`
	Covered []string `json:"covered"`
}

// Diff compares the policy file with the recording's sessions. It changes
// nothing.
func Diff(rec, file string) (*DiffResult, error) {
	base, err := policy.ParseFile(file)
	if err != nil {
		return nil, err
	}
	c, err := collect(rec)
	if err != nil {
		return nil, err
	}
	g := c.place()
	d := &DiffResult{Policy: file, Lacks: []string{}, Unused: []string{}, Covered: []string{}}
	c.lacks(base, g, d)
	c.unused(base, g, d)
	return d, nil
}

// lacks lists every placed need the base does not cover: each
// filesystem sighting by its object, each network row of the placement.
func (c *collected) lacks(base, g *policy.Policy, d *DiffResult) {
	seen := map[string]bool{}
	for _, s := range c.sightings {
		if placement.Covered(base, s.o.Path, s.o.Section) || !placement.Covered(g, s.o.Path, s.o.Section) {
			continue
		}
		k := fmt.Sprintf("[%s] %s", s.o.Section, s.o.Path)
		if !seen[k] {
			seen[k] = true
			d.Lacks = append(d.Lacks, fmt.Sprintf("%s (%s)", k, s.call))
		}
	}
	for _, r := range g.Connect {
		if !slices.ContainsFunc(base.Connect, func(b policy.ConnectRule) bool { return connectCovers(b, r) }) {
			d.Lacks = append(d.Lacks, "[connect] "+r.String())
		}
	}
	for _, r := range g.Bind {
		if !slices.ContainsFunc(base.Bind, func(b policy.BindRule) bool { return b.Port == r.Port && b.Transport == r.Transport }) {
			d.Lacks = append(d.Lacks, "[bind] "+r.String())
		}
	}
	sort.Strings(d.Lacks)
}

// connectCovers reports whether base rule b grants what r grants.
func connectCovers(b, r policy.ConnectRule) bool {
	return b.Transport == r.Transport && (b.Host == "*" || b.Host == r.Host) && (b.Port == 0 || b.Port == r.Port)
}

// unused lists the base's rows no session used, telling apart those an
// ancestor row already covers.
func (c *collected) unused(base, g *policy.Policy, d *DiffResult) {
	for q, secs := range base.FS {
		for sec, on := range secs {
			if !on || c.used(q, sec) {
				continue
			}
			row := fmt.Sprintf("[%s] %s", sec, q)
			if anc := coveringAncestor(base, q, sec); anc != "" {
				d.Covered = append(d.Covered, fmt.Sprintf("%s: covered by [%s] %s", row, sec, anc))
				continue
			}
			d.Unused = append(d.Unused, row)
		}
	}
	for _, r := range base.Connect {
		if !slices.ContainsFunc(g.Connect, func(x policy.ConnectRule) bool { return connectCovers(r, x) }) {
			d.Unused = append(d.Unused, "[connect] "+r.String())
		}
	}
	for _, r := range base.Bind {
		if !slices.Contains(g.Bind, r) {
			d.Unused = append(d.Unused, "[bind] "+r.String())
		}
	}
	sort.Strings(d.Unused)
	sort.Strings(d.Covered)
}

// used reports whether a session needed sec on q or beneath it.
func (c *collected) used(q string, sec policy.Section) bool {
	for _, s := range c.sightings {
		if s.o.Section == sec && (s.o.Path == q || policy.Beneath(s.o.Path, q)) {
			return true
		}
	}
	return false
}

// coveringAncestor is a proper ancestor of q whose row grants sec ("" none).
func coveringAncestor(p *policy.Policy, q string, sec policy.Section) string {
	anc := policy.Ancestors(q)
	for i := len(anc) - 1; i >= 0; i-- {
		if p.FS[anc[i]][sec] {
			return anc[i]
		}
	}
	return ""
}
