package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
)

// sectionLetters are the rights letters each section grants.
var sectionLetters = map[Section]string{
	Read: "r", Execute: "x", Write: "w", Create: "m", CreateIPC: "p", CreateSymlink: "l",
	Delete: "d", Restructure: "mdf", Ioctl: "i",
}

// letterOrder is the order letters are displayed in.
const letterOrder = "rwxmplfdi"

// WriteClass lists the sections that let a program change the file system.
var WriteClass = []Section{Write, Create, CreateIPC, CreateSymlink, Delete, Restructure}

// IsWriteClass reports whether s lets a program change the file system.
func IsWriteClass(s Section) bool {
	for _, w := range WriteClass {
		if w == s {
			return true
		}
	}
	return false
}

// Letters returns the rights letters (r w x m p l f d i, in that
// display order) that a set of sections grants; [restructure] grants m, d
// and f (refer).
func Letters(secs map[Section]bool) string {
	var have [256]bool
	for s, ok := range secs {
		if ok {
			for _, c := range sectionLetters[s] {
				have[c] = true
			}
		}
	}
	var b strings.Builder
	for _, c := range letterOrder {
		if have[c] {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// rights is a set of letters as bits, in letterOrder.
type rights uint16

var sectionRights = func() map[Section]rights {
	m := map[Section]rights{}
	for s, l := range sectionLetters {
		for _, c := range l {
			m[s] |= 1 << strings.IndexRune(letterOrder, c)
		}
	}
	return m
}()

func maskOf(secs map[Section]bool) rights {
	var r rights
	for s, ok := range secs {
		if ok {
			r |= sectionRights[s]
		}
	}
	return r
}

// strictSubset reports whether a is a strict subset of b.
func strictSubset(a, b rights) bool { return a != b && a&^b == 0 }

// Within reports whether p is dir or lies beneath it (both clean and
// absolute): the rule of a directory grant, which covers the directory
// itself.
func Within(p, dir string) bool { return p == dir || Beneath(p, dir) }

// Beneath reports whether child lies strictly beneath ancestor (component-wise).
func Beneath(child, ancestor string) bool {
	if ancestor == "/" {
		return child != "/"
	}
	return strings.HasPrefix(child, ancestor+"/")
}

// Union combines policies as Load does: per path the union of sections,
// network rules unioned keeping first-seen order, limits combined (a zero
// spelling switches a limit off and wins, else the largest value). The
// first comment seen for a path or rule is kept; the header is not (a union
// has no single author). nil policies are skipped; Union() grants nothing.
func Union(ps ...*Policy) *Policy {
	u := newPolicy()
	for _, p := range ps {
		if p == nil {
			continue
		}
		for path, secs := range p.FS {
			for s, ok := range secs {
				if !ok {
					continue
				}
				if u.FS[path] == nil {
					u.FS[path] = map[Section]bool{}
				}
				u.FS[path][s] = true
			}
			if c := p.Comments[path]; c != "" && u.Comments[path] == "" && len(secs) > 0 {
				u.Comments[path] = c
			}
		}
		for _, r := range p.Connect {
			u.addConnect(r)
		}
		for _, r := range p.Bind {
			u.addBind(r)
		}
		for k, l := range p.Limits {
			u.Limits[k] = combineLimit(u.Limits[k], l, u.hasLimit(k))
		}
	}
	return u
}

// Intersect returns what both a and b grant: paths in both with the sections
// both hold, network rules both name, and the limits both name at the
// stricter value (a switched-off limit counts as unbounded). Comments come
// from a.
func Intersect(a, b *Policy) *Policy {
	out := newPolicy()
	if a == nil || b == nil {
		return out
	}
	for path, secs := range a.FS {
		for s, ok := range secs {
			if ok && b.FS[path][s] {
				if out.FS[path] == nil {
					out.FS[path] = map[Section]bool{}
				}
				out.FS[path][s] = true
			}
		}
		if out.FS[path] != nil && a.Comments[path] != "" {
			out.Comments[path] = a.Comments[path]
		}
	}
	for _, r := range a.Connect {
		for _, o := range b.Connect {
			if r.Host == o.Host && r.Port == o.Port && r.Transport == o.Transport {
				out.addConnect(r)
			}
		}
	}
	for _, r := range a.Bind {
		for _, o := range b.Bind {
			if r.Port == o.Port && r.Transport == o.Transport {
				out.addBind(r)
			}
		}
	}
	for k, la := range a.Limits {
		lb, ok := b.Limits[k]
		switch {
		case !ok:
		case la.Off:
			out.Limits[k] = lb
		case lb.Off || la.Value <= lb.Value:
			out.Limits[k] = la
		default:
			out.Limits[k] = lb
		}
	}
	return out
}

// granted returns the rights base grants on path: its own and every
// ancestor's.
func (p *Policy) granted(path string) rights {
	r := maskOf(p.FS[path])
	for _, anc := range Ancestors(path) {
		if secs, ok := p.FS[anc]; ok {
			r |= maskOf(secs)
		}
	}
	return r
}

// Ancestors lists the strict ancestors of a normal absolute path, root first:
// "/a/b/c" gives "/", "/a", "/a/b".
func Ancestors(p string) []string {
	if p == "/" || !strings.HasPrefix(p, "/") {
		return nil
	}
	out := []string{"/"}
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// Remainder is what exercise needs beyond base:
// per path, only the sections whose rights base does not already grant on
// the path or an ancestor; network rules base does not name; every limit of
// exercise. Comments of kept paths and rules are kept.
func Remainder(exercise, base *Policy) *Policy {
	out := newPolicy()
	if exercise == nil {
		return out
	}
	if base == nil {
		base = newPolicy()
	}
	for path, secs := range exercise.FS {
		have := base.granted(path)
		for s, ok := range secs {
			if ok && sectionRights[s]&^have != 0 {
				if out.FS[path] == nil {
					out.FS[path] = map[Section]bool{}
				}
				out.FS[path][s] = true
			}
		}
		if out.FS[path] != nil && exercise.Comments[path] != "" {
			out.Comments[path] = exercise.Comments[path]
		}
	}
	for _, r := range exercise.Connect {
		if !containsConnect(base.Connect, r) {
			out.addConnect(r)
		}
	}
	for _, r := range exercise.Bind {
		if !containsBind(base.Bind, r) {
			out.addBind(r)
		}
	}
	for k, l := range exercise.Limits {
		out.Limits[k] = l
	}
	return out
}

func containsConnect(rs []ConnectRule, r ConnectRule) bool {
	for _, o := range rs {
		if o.Host == r.Host && o.Port == r.Port && o.Transport == r.Transport {
			return true
		}
	}
	return false
}

func containsBind(rs []BindRule, r BindRule) bool {
	for _, o := range rs {
		if o.Port == r.Port && o.Transport == r.Transport {
			return true
		}
	}
	return false
}

// Nesting is one path whose rights are a strict subset of an ancestor's.
type Nesting struct {
	Path, Ancestor           string
	Letters, AncestorLetters string
}

// String words the nesting as the enforcer's refusal names it.
func (n Nesting) String() string {
	return fmt.Sprintf("%q is granted %q but lies beneath %q, which is granted the wider %q", n.Path, n.Letters, n.Ancestor, n.AncestorLetters)
}

// StrictSubsets lists every path whose rights letters are a strict subset of
// an ancestor path's, sorted by path then ancestor. The enforcer refuses such
// a policy (after resolving symlinks; this check is lexical), because
// Landlock grants the ancestor's rights beneath it anyway and the narrower
// entry would mislead a reader. Incomparable sets are fine.
func (p *Policy) StrictSubsets() []Nesting {
	var out []Nesting
	for _, path := range p.sortedPaths() {
		own := maskOf(p.FS[path])
		for _, anc := range Ancestors(path) {
			secs, ok := p.FS[anc]
			if !ok {
				continue
			}
			if al := maskOf(secs); al != 0 && strictSubset(own, al) {
				out = append(out, Nesting{Path: path, Ancestor: anc, Letters: Letters(p.FS[path]), AncestorLetters: Letters(secs)})
			}
		}
	}
	return out
}

func (p *Policy) sortedPaths() []string {
	var paths []string
	for path, secs := range p.FS {
		if maskOf(secs) != 0 {
			paths = append(paths, path)
		}
	}
	sort.Strings(paths)
	return paths
}

// NormaliseHierarchy returns a copy in which every path whose rights are a
// strict subset of an ancestor's is raised to hold the ancestor's sections
// too (the orchestrator and the pruner apply it: Landlock grants the ancestor's rights beneath it anyway,
// and the enforcer refuses strict-subset nesting). Incomparable sets are left
// alone. The error is non-nil (and the policy nil) only when p itself is not
// a valid policy (see Validate); the result always passes StrictSubsets
// with no findings.
func (p *Policy) NormaliseHierarchy() (*Policy, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("normalise hierarchy: %w", err)
	}
	q := p.Clone()
	// Ancestors sort before their descendants, and each path is raised
	// against its ancestors root first; one pass reaches the fixed point
	// (a raised path only grows, so it never becomes a strict subset of an
	// ancestor it was checked against).
	masks := map[string]rights{}
	for path, secs := range q.FS {
		masks[path] = maskOf(secs)
	}
	for _, path := range q.sortedPaths() {
		for _, anc := range Ancestors(path) {
			al, ok := masks[anc]
			if !ok || al == 0 || !strictSubset(masks[path], al) {
				continue
			}
			for s, ok := range q.FS[anc] {
				if ok {
					q.FS[path][s] = true
				}
			}
			masks[path] |= al
		}
	}
	return q, nil
}

// IsMissing reports whether err, from a stat of a path a policy names,
// means the path is not there: ENOENT, or ENOTDIR (a file stands where the
// path needs a directory, as in /etc/passwd/x). The enforcer counts such a
// path missing (it grants nothing); any other error (ENAMETOOLONG, ELOOP,
// EACCES) refuses the policy. StatPaths judges alike, so that `policy check
// --exercise` and `run` agree.
func IsMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// PathError is a path a policy names whose stat fails for another reason
// than IsMissing's: the enforcer refuses a policy naming it.
type PathError struct {
	Path string
	Err  error
}

func (e PathError) String() string { return e.Path + ": " + e.Err.Error() }

// MissingPaths returns the paths, in the given sections, that do not exist
// on this machine (following symlinks; see IsMissing), sorted. With no
// sections it checks [read], [execute] and [ioctl]: the sections an
// exercise config requires to exist (a base tolerates missing ones,
// which are dropped at enforcement).
func (p *Policy) MissingPaths(sections ...Section) []string {
	missing, _ := p.StatPaths(sections...)
	return missing
}

// StatPaths stats the paths of the given sections (with none, as
// MissingPaths) and returns, sorted, those that are missing (IsMissing) and
// those that cannot be inspected at all. It and MissingPaths are the only
// functions of the package that look at the file system; Parse never does.
func (p *Policy) StatPaths(sections ...Section) (missing []string, unusable []PathError) {
	if len(sections) == 0 {
		sections = []Section{Read, Execute, Ioctl}
	}
	seen := map[string]bool{}
	for _, s := range sections {
		for _, path := range p.Paths(s) {
			if seen[path] {
				continue
			}
			seen[path] = true
			_, err := os.Stat(path)
			switch {
			case err == nil:
			case IsMissing(err):
				missing = append(missing, path)
			default:
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				unusable = append(unusable, PathError{path, err})
			}
		}
	}
	sort.Strings(missing)
	sort.Slice(unusable, func(i, j int) bool { return unusable[i].Path < unusable[j].Path })
	return missing, unusable
}

// Diff lists what b grants that a does not ("+ " lines) and what a grants
// that b does not ("- " lines), one grant per line in canonical order, e.g.
// "+ [read] /etc", "- [connect] allow 127.0.0.1:*", "+ [limits] timeout=90".
// Comments are ignored. Equal grants give no lines.
func Diff(a, b *Policy) []string {
	al, bl := grantLines(a), grantLines(b)
	in := func(set []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range set {
			m[l] = true
		}
		return m
	}
	am, bm := in(al), in(bl)
	var out []string
	for _, l := range al {
		if !bm[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !am[l] {
			out = append(out, "+ "+l)
		}
	}
	return out
}

func grantLines(p *Policy) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, s := range FilesystemSections {
		for _, path := range p.Paths(s) {
			out = append(out, "["+string(s)+"] "+path)
		}
	}
	for _, r := range sortedConnect(p.Connect) {
		out = append(out, "[connect] "+r.String())
	}
	for _, r := range sortedBind(p.Bind) {
		out = append(out, "[bind] "+r.String())
	}
	for _, k := range LimitKeys {
		if l, ok := p.Limits[k]; ok {
			out = append(out, "[limits] "+string(k)+"="+l.Format(k))
		}
	}
	return out
}
