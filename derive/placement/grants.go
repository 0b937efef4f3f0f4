package placement

import (
	"sort"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// Grants places every observation: per-run names first (grouped by section
// and shape over all runs), then Place. The result is sorted by path and
// section, without duplicates; reports likewise.
func Grants(obs []Observation, env Env) ([]Grant, []Report) {
	names, matched, values := matchNames(obs)
	perRun := perRunValues(values)
	groups := perRunGroups{}
	var grants []Grant
	var reports []Report
	for i, o := range obs {
		if matched[i] {
			if cut := perRunCut(o, names[i], perRun); cut >= 0 {
				if r := groups.add(o, names[i], cut, env); r != nil {
					reports = append(reports, *r)
				}
				continue
			}
		}
		g, r := Place(o, env)
		if r != nil {
			reports = append(reports, *r)
			continue
		}
		grants = append(grants, g)
	}
	grants = append(grants, groups.grants()...)
	sort.Slice(grants, func(i, j int) bool {
		a, b := grants[i], grants[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Section != b.Section {
			return a.Section < b.Section
		}
		return a.Object < b.Object
	})
	sort.Slice(reports, func(i, j int) bool {
		a, b := reports[i], reports[j]
		if a.Object != b.Object {
			return a.Object < b.Object
		}
		return a.Section < b.Section
	})
	return dedupGrants(grants), dedupReports(reports)
}

func uniqueSorted(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func dedupGrants(gs []Grant) []Grant {
	var out []Grant
	for _, g := range gs {
		if n := len(out); n > 0 && out[n-1].Path == g.Path && out[n-1].Section == g.Section {
			if out[n-1].Comment == "" {
				out[n-1].Comment = g.Comment
			}
			continue
		}
		out = append(out, g)
	}
	return out
}

func dedupReports(rs []Report) []Report {
	var out []Report
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1] == r {
			continue
		}
		out = append(out, r)
	}
	return out
}

// sectionCovers lists, per section, the sections that grant all of its
// rights ([restructure] holds create and delete).
var sectionCovers = map[policy.Section][]policy.Section{
	policy.Create: {policy.Create, policy.Restructure},
	policy.Delete: {policy.Delete, policy.Restructure},
}

// Covered reports whether p already grants section on path: the path or an
// ancestor holds it (or a section holding all its rights).
func Covered(p *policy.Policy, path string, s policy.Section) bool {
	if p == nil {
		return false
	}
	covers := sectionCovers[s]
	if covers == nil {
		covers = []policy.Section{s}
	}
	for _, a := range append(policy.Ancestors(path), path) {
		for _, c := range covers {
			if p.FS[a][c] {
				return true
			}
		}
	}
	return false
}

// Add adds the grants to p (in place), with their comments on paths that
// have none yet, and returns how many (path, section) pairs were new.
func Add(p *policy.Policy, gs []Grant) int {
	if p.FS == nil {
		p.FS = map[string]map[policy.Section]bool{}
	}
	n := 0
	for _, g := range gs {
		if p.FS[g.Path] == nil {
			p.FS[g.Path] = map[policy.Section]bool{}
		}
		if !p.FS[g.Path][g.Section] {
			n++
		}
		p.FS[g.Path][g.Section] = true
		if g.Comment != "" {
			if p.Comments == nil {
				p.Comments = map[string]string{}
			}
			if p.Comments[g.Path] == "" {
				p.Comments[g.Path] = g.Comment
			}
		}
	}
	return n
}
