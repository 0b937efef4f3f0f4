package placement

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
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
