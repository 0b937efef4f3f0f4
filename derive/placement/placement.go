package placement

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// DefaultFineRoots are the directories beneath which a read is granted file
// by file: the file refused, never its directory.
var DefaultFineRoots = []string{"/etc", "/dev", "/proc", "/sys", "/root", "/home", "/run"}

// SpecificationAncestors are never given a write-class right: they hold the
// working directory, so a write right there would let a run change what the
// next run starts from.
var SpecificationAncestors = []string{"/", "/var", "/var/tmp"}

// MinimumDepth is the shallowest a grant may be widened to: never / (depth
// 0) nor a top-level directory (depth 1).
const MinimumDepth = 2

// DefaultThreshold is Compact's default: three read-class siblings become
// their parent.
const DefaultThreshold = 3

// Observation is one (object, section) a confirmed refusal needs.
type Observation struct {
	// Path is the object as attribution charged it (absolute, clean).
	Path    string
	Section policy.Section
	// Run is the number of the observed run that showed it.
	Run int
	// TGID and TID are the refusing process and thread.
	TGID, TID int
}

// Env is what placement needs to know about the machine. The zero value
// treats every path as missing and climbs nowhere.
type Env struct {
	// Existed reports whether path existed before the run, and whether it
	// was a directory. Nil: nothing existed.
	Existed func(path string) (exists, dir bool)
	// FineRoots, nil means DefaultFineRoots.
	FineRoots []string
	// Scanned are the roots inside which a missing object may climb to its
	// nearest existing ancestor: the working directory and pre-existing
	// directories the policy already grants a write-class right on.
	Scanned []string
	// CompiledPrograms is the directory whose programs the exercise runs
	// ("" none): [execute] may sit there beside a write-class right, and a
	// program the run wrote there may be executed.
	CompiledPrograms string
	// Pinned are the pinned read roots (prune.json pinned_read_roots, their
	// manifests verified): a [read] of anything beneath one is granted as the
	// root itself, one entry; a write-class right inside one is reported.
	Pinned []string
	// PseudoTerminals: the exercise declares uses_pseudo_terminals. A
	// terminal is opened read-write and set up by ioctl, so [write] and
	// [ioctl] on a per-run /dev/pts/<n> are granted on /dev/pts as its
	// [read] is; without it they are reported.
	PseudoTerminals bool
}

// ptyRight reports whether s on a per-run name of shape is a right a
// pseudo-terminal exercise is granted on the names' directory.
func (e Env) ptyRight(shape string, s policy.Section) bool {
	return e.PseudoTerminals && shape == "/dev/pts/<n>" && (s == policy.Write || s == policy.Ioctl)
}

// PinnedComment is written above a pinned read root in a policy.
func PinnedComment(root string) string {
	return fmt.Sprintf("pinned: [read] on the directory %s as one entry, not file by file; "+
		"its files are held to a manifest of SHA-256 sums, re-hashed before the prune's runs (prune.json pinned_read_roots)", root)
}

// pinnedRoot returns the pinned read root p is or lies beneath, or "".
func (e Env) pinnedRoot(p string) string {
	for _, r := range e.Pinned {
		if p == r || policy.Beneath(p, r) {
			return r
		}
	}
	return ""
}

func (e Env) existed(p string) (bool, bool) {
	if e.Existed == nil {
		return false, false
	}
	return e.Existed(p)
}

func (e Env) fineRoots() []string {
	if e.FineRoots == nil {
		return DefaultFineRoots
	}
	return e.FineRoots
}

// InFineRoot reports whether p is a fine-grained root or beneath one.
func (e Env) InFineRoot(p string) bool {
	for _, r := range e.fineRoots() {
		if p == r || policy.Beneath(p, r) {
			return true
		}
	}
	return false
}

func (e Env) inCompiled(p string) bool {
	c := e.CompiledPrograms
	return c != "" && (p == c || policy.Beneath(p, c))
}

// Grant is one placed (path, section) with the object that asked for it.
type Grant struct {
	Path    string
	Section policy.Section
	// Object is the observed object; Widened is Path != Object.
	Object  string
	Widened bool
	// Comment is written above the path in the policy ("" none).
	Comment string
}

// Report is an observed need that no grant covers, and why.
type Report struct {
	Object  string
	Section policy.Section
	Reason  string
}

func (r Report) String() string {
	return fmt.Sprintf("[%s] %s: %s", r.Section, r.Object, r.Reason)
}

// Depth is the number of components of an absolute path: / is 0, /usr 1.
func Depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// IsReadClass reports whether s only lets a program look (read, execute).
func IsReadClass(s policy.Section) bool { return s == policy.Read || s == policy.Execute }

// Carriable reports whether a policy line can name p: absolute, lexically
// normal, valid UTF-8, and none of * ? [ #, control characters, DEL,
// U+0085, U+2028, U+2029, nor surrounding white space.
func Carriable(p string) bool {
	if p == "" || p[0] != '/' || path.Clean(p) != p || !utf8.ValidString(p) || strings.TrimSpace(p) != p {
		return false
	}
	for _, r := range p {
		switch {
		case r == '*' || r == '?' || r == '[' || r == '#':
			return false
		case r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029:
			return false
		}
	}
	return true
}

func isSpecAncestor(p string) bool {
	for _, a := range SpecificationAncestors {
		if p == a {
			return true
		}
	}
	return false
}

// climb returns the nearest ancestor of p that existed before the run, lies
// inside one of the scanned roots (or is one) and has depth ≥ MinimumDepth.
func (e Env) climb(p string) (string, bool) {
	anc := policy.Ancestors(p)
	for i := len(anc) - 1; i >= 0; i-- {
		a := anc[i]
		if Depth(a) < MinimumDepth {
			return "", false
		}
		inside := false
		for _, r := range e.Scanned {
			if a == r || policy.Beneath(a, r) {
				inside = true
				break
			}
		}
		if !inside {
			return "", false
		}
		if ok, dir := e.existed(a); ok && dir {
			return a, true
		}
	}
	return "", false
}

// Place decides where one observation is granted. Per-run names are not
// considered here (see Grants); a path under /proc/self or
// /proc/thread-self is reported.
func Place(o Observation, env Env) (Grant, *Report) {
	g := Grant{Path: o.Path, Section: o.Section, Object: o.Path}
	report := func(why string) (Grant, *Report) {
		return Grant{}, &Report{Object: o.Path, Section: o.Section, Reason: why}
	}
	p := o.Path
	if p == "/proc/self" || p == "/proc/thread-self" || policy.Beneath(p, "/proc/self") || policy.Beneath(p, "/proc/thread-self") {
		return report("still a /proc/self link: no process number to place it by")
	}
	if root := env.pinnedRoot(p); root != "" {
		if o.Section == policy.Read {
			g.Path, g.Widened, g.Comment = root, p != root, PinnedComment(root)
			return g, nil
		}
		if !IsReadClass(o.Section) {
			return report("a write-class right inside the pinned read root " + root + " is never granted")
		}
	}
	exists, dir := env.existed(p)
	if o.Section == policy.Execute && !exists && !env.inCompiled(p) {
		return report("the run executed what it wrote, outside a declared compiled-programs directory")
	}
	if !Carriable(p) {
		if IsReadClass(o.Section) && !env.InFineRoot(p) {
			for a := path.Dir(p); Depth(a) >= MinimumDepth; a = path.Dir(a) {
				if Carriable(a) {
					g.Path, g.Widened = a, true
					g.Comment = fmt.Sprintf("widened: %q cannot be written in a policy; granted on its nearest nameable directory", p)
					return g, nil
				}
			}
		}
		return report("the name cannot be written in a policy line")
	}
	if IsReadClass(o.Section) {
		if why := placeRead(&g, env, exists, dir); why != "" {
			return report(why)
		}
		return g, nil
	}
	// Write class.
	if !exists {
		a, ok := env.climb(p)
		if !ok {
			return report("did not exist before the run, and no directory that did lies inside a scanned root at depth 2 or deeper")
		}
		g.Path, g.Widened = a, true
	}
	if isSpecAncestor(g.Path) {
		return report("a write-class right on " + g.Path + " would reach the working directory's parents")
	}
	return g, nil
}

// placeRead places a read-class grant g of a carriable path that existed
// (a directory when dir) or not: a missing one on its nearest existing
// ancestor inside a scanned root, a file on its directory unless inside a
// fine-grained root. It returns why the grant cannot be placed, or "".
func placeRead(g *Grant, env Env, exists, dir bool) string {
	p := g.Path
	switch {
	case !exists:
		a, ok := env.climb(p)
		if !ok {
			return "did not exist before the run, and no directory that did lies inside a scanned root at depth 2 or deeper"
		}
		g.Path, g.Widened = a, true
	case dir:
		if Depth(p) < MinimumDepth {
			return "a top-level directory is never granted whole"
		}
		if env.InFineRoot(p) {
			g.Comment = fmt.Sprintf("listed: [%s] on the directory %s makes every entry beneath it readable; Landlock has no list-only right", g.Section, p)
		}
	case env.InFineRoot(p):
		// file by file
	default:
		if parent := path.Dir(p); Depth(parent) >= MinimumDepth {
			g.Path, g.Widened = parent, true
		}
	}
	return ""
}

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
