package orchestrate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// language is one language's merged result.
type language struct {
	name      string
	exercises []*exercise
	base      *policy.Policy // union, raised, no limits, no comments
	common    *policy.Policy
	rows      []policy.BindRule // union of the exercises' ABI-10 rows
}

// Capitalised is Python's str.capitalize of a key, as Phobos names debug
// files: "java-gradle" → "Java-gradle".
func Capitalised(k string) string {
	if k == "" {
		return k
	}
	return strings.ToUpper(k[:1]) + strings.ToLower(k[1:])
}

// stripped removes limits, comments and header from p in place (for a
// policy this package made) and returns it.
func stripped(p *policy.Policy) *policy.Policy {
	p.Limits = map[policy.LimitKey]policy.Limit{}
	p.Comments = map[string]string{}
	p.Header = nil
	for i := range p.Connect {
		p.Connect[i].Comment = ""
	}
	for i := range p.Bind {
		p.Bind[i].Comment = ""
	}
	return p
}

// bareBase returns p without limits, comments or header.
func bareBase(p *policy.Policy) *policy.Policy {
	q := p.Rules()
	q.Limits = map[policy.LimitKey]policy.Limit{}
	return q
}

func mergeLanguage(name string, exs []*exercise, probs *problems) *language {
	l := &language{name: name, exercises: exs}
	var ps []*policy.Policy
	for _, ex := range exs {
		ps = append(ps, ex.pol)
	}
	u, err := stripped(policy.Union(ps...)).NormaliseHierarchy()
	if err != nil {
		probs.add("the %s base cannot be written: %v", name, err)
		return nil
	}
	if len(u.FS) == 0 {
		probs.add("no usable pruning result for: %s (its base names no path)", name)
		return nil
	}
	for _, c := range executeConflicts(u, ps) {
		probs.add("BaseLanguage-%s.cfg would put %s, which no single exercise had; [execute] never overlaps a write-class right (Phobos #185)", name, c)
	}
	l.base = u
	common := bareBase(ps[0])
	for _, p := range ps[1:] {
		common = policy.Intersect(common, bareBase(p))
	}
	if l.common, err = common.NormaliseHierarchy(); err != nil {
		probs.add("the %s common policy cannot be written: %v", name, err)
		return nil
	}
	var rows []policy.BindRule
	seen := map[policy.BindRule]bool{}
	for _, ex := range exs {
		for _, r := range ex.rows {
			r.Comment = ""
			if !seen[r] {
				seen[r] = true
				rows = append(rows, r)
			}
		}
	}
	l.rows = rows
	return l
}

// executeConflicts lists every place where the union u puts [execute] on a
// path that overlaps a write-class right (on the path itself, an ancestor or
// an entry beneath it) when no single input policy had that overlap. Phobos
// refuses such a language base and omits BasePhobos.cfg for it.
func executeConflicts(u *policy.Policy, inputs []*policy.Policy) []string {
	writers := map[string]bool{}
	var writeSorted []string
	for path, secs := range u.FS {
		for s, ok := range secs {
			if ok && policy.IsWriteClass(s) {
				writers[path] = true
				writeSorted = append(writeSorted, path)
				break
			}
		}
	}
	sort.Strings(writeSorted)
	hadBoth := func(exec, write string) bool {
		for _, p := range inputs {
			if !p.FS[exec][policy.Execute] {
				continue
			}
			for s, ok := range p.FS[write] {
				if ok && policy.IsWriteClass(s) {
					return true
				}
			}
		}
		return false
	}
	var out []string
	for _, exec := range u.Paths(policy.Execute) {
		var overlaps []string
		for _, a := range policy.Ancestors(exec) {
			if writers[a] {
				overlaps = append(overlaps, a)
			}
		}
		if writers[exec] {
			overlaps = append(overlaps, exec)
		}
		prefix := exec + "/"
		if exec == "/" {
			prefix = "/"
		}
		for i := sort.SearchStrings(writeSorted, prefix); i < len(writeSorted) && strings.HasPrefix(writeSorted[i], prefix); i++ {
			if writeSorted[i] != exec {
				overlaps = append(overlaps, writeSorted[i])
			}
		}
		for _, w := range overlaps {
			if !hadBoth(exec, w) {
				out = append(out, fmt.Sprintf("[execute] on %s beside a write-class right on %s", exec, w))
			}
		}
	}
	return out
}

// output is one rendered file of the tree, by slash path relative to the root.
type output struct {
	path string
	data []byte
}

// render builds every output file of the merge in memory.
func render(langs []*language, chdir string, warn func(string)) []output {
	var out []output
	add := func(path string, p *policy.Policy) { out = append(out, output{path, p.Render()}) }
	var bases []*policy.Policy
	for _, l := range langs {
		bases = append(bases, l.base)
		add("BaseLanguage-"+l.name+".cfg", l.base)
		for _, ex := range l.exercises {
			ex.remainder = policy.Remainder(ex.pol, l.base).Rules()
			add("exercises/"+ex.stem+".cfg", ex.remainder)
			if len(ex.rows) > 0 {
				add("exercises/"+ex.stem+".abi10.cfg", bindOnly(ex.rows))
			}
		}
		if len(l.rows) > 0 {
			add("Abi10-"+l.name+".cfg", bindOnly(l.rows))
		}
		add("debug/Base"+Capitalised(l.name)+"Common.cfg", l.common)
	}
	all := policy.Union(bases...)
	if n, err := all.NormaliseHierarchy(); err == nil {
		all = n
	}
	if c := executeConflicts(all, bases); len(c) > 0 {
		more := ""
		switch len(c) {
		case 1:
		case 2:
			more = " (and 1 more overlap)"
		default:
			more = fmt.Sprintf(" (and %d more overlaps)", len(c)-1)
		}
		warn(fmt.Sprintf("BasePhobos.cfg is not written: across languages the union would put %s%s, which no language base had", c[0], more))
	} else {
		add("BasePhobos.cfg", all)
	}
	out = append(out, output{"TailPhobos.cfg", []byte("--chdir " + chdir + "\n")})
	add("debug/BasePhobosIntersect.cfg", intersectAll(all, bases))
	for i, l := range langs {
		var others []*policy.Policy
		for j, b := range bases {
			if j != i {
				others = append(others, b)
			}
		}
		add("debug/Base"+Capitalised(l.name)+"Only.cfg", only(l.base, policy.Union(others...)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

func bindOnly(rows []policy.BindRule) *policy.Policy {
	return &policy.Policy{Bind: rows}
}

// intersectAll: the paths every base names, with the union's sections; the
// network rules every base names.
func intersectAll(union *policy.Policy, bases []*policy.Policy) *policy.Policy {
	out := &policy.Policy{FS: map[string]map[policy.Section]bool{}}
	for path, secs := range union.FS {
		inAll := true
		for _, b := range bases {
			if len(b.FS[path]) == 0 {
				inAll = false
				break
			}
		}
		if inAll {
			out.FS[path] = secs
		}
	}
	net := bases[0]
	for _, b := range bases[1:] {
		net = policy.Intersect(net, b)
	}
	out.Connect, out.Bind = net.Connect, net.Bind
	return out
}

// only: the paths of base that no other base names (with base's sections),
// and base's rules no other base names.
func only(base, others *policy.Policy) *policy.Policy {
	out := &policy.Policy{FS: map[string]map[policy.Section]bool{}}
	for path, secs := range base.FS {
		if len(others.FS[path]) == 0 {
			out.FS[path] = secs
		}
	}
	rem := policy.Remainder(&policy.Policy{Connect: base.Connect, Bind: base.Bind}, others)
	out.Connect, out.Bind = rem.Connect, rem.Bind
	return out
}
