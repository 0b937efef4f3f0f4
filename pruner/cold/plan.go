package cold

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/mountinfo"
)

// Kind is what Enter does with one path of the new root.
type Kind int

// The kinds of step.
const (
	// Overlay mounts an overlay whose lower layer is the old tree's mount
	// at Path and whose upper layer is thrown away with the namespace. A
	// path that is not a directory is treated as Bind, and copied first
	// when it is writable.
	Overlay Kind = iota
	// Bind binds the old tree's mount at Path alone (its flags kept: a
	// read-only mount stays read-only).
	Bind
	// RBind binds Path with every mount beneath it: /proc, /sys, /dev and
	// the keep paths, whose writes must reach the old tree.
	RBind
)

func (k Kind) String() string {
	return [...]string{"overlay", "bind", "rbind"}[k]
}

// Step is one mount of the new root, at the same path as in the old tree.
type Step struct {
	Kind     Kind
	Path     string
	FSType   string
	ReadOnly bool
}

// Whole are the trees bound with everything beneath them: the kernel's
// views and the device nodes are not a cache a run can leave anything in.
var Whole = []string{"/proc", "/sys", "/dev"}

// pseudo are file systems that are no directory tree of files a run could
// leave behind, or that overlayfs cannot take as a lower layer: they are
// bound as they are.
var pseudo = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true, "cgroup": true, "cgroup2": true,
	"mqueue": true, "nsfs": true, "debugfs": true, "tracefs": true, "securityfs": true, "bpf": true,
	"fusectl": true, "configfs": true, "binfmt_misc": true, "pstore": true, "efivarfs": true,
	"hugetlbfs": true, "autofs": true, "rpc_pipefs": true, "selinuxfs": true,
}

// Plan says how Enter rebuilds the tree of mounts: the root's overlay
// first, then one step per visible mount, parents before children (the
// last mount at a path wins, as it hides the others), Whole and the keep
// paths bound with what lies beneath them, and nothing at or beneath the
// stage, whose tmpfs holds the new root. keep and stage are absolute,
// clean paths; stage must not lie beneath a keep path nor a keep path
// beneath the stage.
func Plan(mounts []mountinfo.Mount, keep []string, stage string) ([]Step, error) {
	for _, p := range append([]string{stage}, keep...) {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return nil, fmt.Errorf("%q: want an absolute, clean path other than /", p)
		}
	}
	for _, k := range keep {
		if policy.Within(stage, k) || policy.Within(k, stage) {
			return nil, fmt.Errorf("the stage %s and the keep path %s overlap: the stage's tmpfs would be bound into the run", stage, k)
		}
	}
	last := map[string]mountinfo.Mount{}
	var order []string
	for _, m := range mounts {
		if _, seen := last[m.Point]; !seen {
			order = append(order, m.Point)
		}
		last[m.Point] = m
	}
	rootStep := Step{Kind: Overlay, Path: "/"}
	if m, ok := last["/"]; ok {
		rootStep.FSType, rootStep.ReadOnly = m.FSType, m.ReadOnly
	}
	var steps []Step
	for _, p := range order {
		m := last[p]
		if p == "/" || policy.Within(p, stage) || underAny(p, Whole) || underAny(p, keep) {
			continue
		}
		st := Step{Kind: Overlay, Path: p, FSType: m.FSType, ReadOnly: m.ReadOnly}
		if m.ReadOnly || pseudo[m.FSType] {
			st.Kind = Bind
		}
		steps = append(steps, st)
	}
	for _, p := range append(slices.Clone(Whole), keep...) {
		steps = append(steps, Step{Kind: RBind, Path: p})
	}
	// Parents before children; at one depth, the order of mountinfo.
	slices.SortStableFunc(steps, func(a, b Step) int { return depth(a.Path) - depth(b.Path) })
	if rootStep.ReadOnly {
		rootStep.Kind = Bind
	}
	return append([]Step{rootStep}, steps...), nil
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if policy.Within(p, d) {
			return true
		}
	}
	return false
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}
