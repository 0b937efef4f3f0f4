package placement

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// perRun patterns: the whole path, first match wins. Each names, per
// numeric capture, the placeholder it stands for.
var perRunPatterns = []struct {
	re    *lazyre.Regexp
	names []string
}{
	{lazyre.New(`^/proc/(0|[1-9][0-9]*)/task/(0|[1-9][0-9]*)(/.*)?$`), []string{"<pid>", "<tid>"}},
	{lazyre.New(`^/proc/(0|[1-9][0-9]*)/(?:fd|fdinfo)/(0|[1-9][0-9]*)$`), []string{"<pid>", "<fd>"}},
	{lazyre.New(`^/proc/(0|[1-9][0-9]*)(/.*)?$`), []string{"<pid>"}},
	{lazyre.New(`^/dev/pts/(0|[1-9][0-9]*)$`), []string{"<n>"}},
}

// name is a path matching a per-run pattern: its shape (numbers replaced by
// placeholders), and each number with the component index it sits at.
type name struct {
	shape  string
	values []string
	comps  []int // component index (1 = first after /) of each value
	kinds  []string
}

func matchName(p string) (name, bool) {
	for _, pat := range perRunPatterns {
		m := pat.re.FindStringSubmatchIndex(p)
		if m == nil {
			continue
		}
		var n name
		shape := []byte{}
		last := 0
		for i, kind := range pat.names {
			s, e := m[2+2*i], m[3+2*i]
			shape = append(shape, p[last:s]...)
			shape = append(shape, kind...)
			last = e
			n.values = append(n.values, p[s:e])
			n.comps = append(n.comps, strings.Count(p[:s], "/"))
			n.kinds = append(n.kinds, kind)
		}
		n.shape = string(append(shape, p[last:]...))
		return n, true
	}
	return name{}, false
}

// perRunKey is one numeric position of a per-run shape in one section.
type perRunKey struct {
	section policy.Section
	shape   string
	pos     int
}

// runValues holds, for each run, the set of values seen at one position.
type runValues map[int]map[string]bool

// matchNames matches every observation against the per-run patterns
// (matched[i] says whether obs[i] did, names[i] how) and collects the
// values each run saw at each position.
func matchNames(obs []Observation) (names []name, matched []bool, values map[perRunKey]runValues) {
	values = map[perRunKey]runValues{}
	names = make([]name, len(obs))
	matched = make([]bool, len(obs))
	for i, o := range obs {
		n, ok := matchName(o.Path)
		if !ok {
			continue
		}
		names[i], matched[i] = n, true
		for j, v := range n.values {
			k := perRunKey{o.Section, n.shape, j}
			if values[k] == nil {
				values[k] = runValues{}
			}
			if values[k][o.Run] == nil {
				values[k][o.Run] = map[string]bool{}
			}
			values[k][o.Run][v] = true
		}
	}
	return names, matched, values
}

// perRunValues returns, per position, the values that are per-run: those
// outside the values every run holds, when at least two runs hold such a
// value.
func perRunValues(values map[perRunKey]runValues) map[perRunKey]map[string]bool {
	perRun := map[perRunKey]map[string]bool{}
	for k, runs := range values {
		stable := runs.common()
		outside := 0
		set := map[string]bool{}
		for _, vs := range runs {
			hit := false
			for v := range vs {
				if !stable[v] {
					set[v], hit = true, true
				}
			}
			if hit {
				outside++
			}
		}
		if outside >= 2 {
			perRun[k] = set
		}
	}
	return perRun
}

// common returns the values every run saw.
func (runs runValues) common() map[string]bool {
	var stable map[string]bool
	for _, vs := range runs {
		if stable == nil {
			stable = map[string]bool{}
			for v := range vs {
				stable[v] = true
			}
			continue
		}
		for v := range stable {
			if !vs[v] {
				delete(stable, v)
			}
		}
	}
	return stable
}

// perRunCut returns the component index at which o's path, matched as n,
// first holds a per-run value (one that changes between runs, a pty
// number, or the process's own pid or tid), or -1 if it holds none.
func perRunCut(o Observation, n name, perRun map[perRunKey]map[string]bool) int {
	for j, v := range n.values {
		per := perRun[perRunKey{o.Section, n.shape, j}][v] || n.kinds[j] == "<n>"
		if (n.kinds[j] == "<pid>" && (v == strconv.Itoa(o.TGID) || v == strconv.Itoa(o.TID))) ||
			(n.kinds[j] == "<tid>" && v == strconv.Itoa(o.TID)) {
			per = true
		}
		if per {
			return n.comps[j]
		}
	}
	return -1
}

// perRunGroup is the per-run names of one shape and section beneath one
// stable directory, which is granted in their place.
type perRunGroup struct {
	dir, shape string
	section    policy.Section
	examples   []string
}

// perRunGroups are the groups by directory, section and shape.
type perRunGroups map[string]*perRunGroup

// add puts o, a per-run name n whose stable part ends before component
// cut, into its group, or reports why it is never granted.
func (groups perRunGroups) add(o Observation, n name, cut int, env Env) *Report {
	parts := strings.Split(o.Path, "/")
	dir := strings.Join(parts[:cut], "/")
	if dir == "" {
		dir = "/"
	}
	switch {
	case !IsReadClass(o.Section) && !env.ptyRight(n.shape, o.Section):
		return &Report{o.Path, o.Section, "a write-class right on a per-run name (" + n.shape + ") is never granted or widened" +
			" (on /dev/pts/<n>, [write] and [ioctl] are granted on /dev/pts with uses_pseudo_terminals)"}
	case Depth(dir) < MinimumDepth:
		return &Report{o.Path, o.Section, "per-run name (" + n.shape + ") whose stable directory " + dir + " is / or a top-level directory; never widened there"}
	}
	gk := dir + "\x00" + string(o.Section) + "\x00" + n.shape
	g := groups[gk]
	if g == nil {
		g = &perRunGroup{dir: dir, shape: n.shape, section: o.Section}
		groups[gk] = g
	}
	g.examples = append(g.examples, o.Path)
	return nil
}

// grants is one widened grant per group, its comment naming up to three
// of the names observed.
func (groups perRunGroups) grants() []Grant {
	var grants []Grant
	for _, g := range groups {
		ex := uniqueSorted(g.examples)
		shown := ex
		more := ""
		if len(ex) > 3 {
			shown, more = ex[:3], fmt.Sprintf(" and %d more", len(ex)-3)
		}
		grants = append(grants, Grant{Path: g.dir, Section: g.section, Object: ex[0], Widened: true,
			Comment: fmt.Sprintf("per-run name: %s, observed as %s%s; granted on %s", g.shape, strings.Join(shown, ", "), more, g.dir)})
	}
	return grants
}
