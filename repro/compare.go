package repro

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// ResultSchema is the version of a Result document (`repro --json`).
const ResultSchema = 1

// ObservationFile is the file the in-guest side writes into the results.
const ObservationFile = "repro-observation.json"

// HostKernel names this machine's running kernel.
const HostKernel = "host"

// Statuses of a comparison, as `lockstep repro` exits.
const (
	StatusSame          = 0
	StatusDiffer        = 1
	StatusIndeterminate = 3
)

// Difference kinds.
const (
	// KindRefusedOnOne: one kernel refused the call, the other allowed it.
	KindRefusedOnOne = "refused-on-one"
	// KindRights: both refused the call, for different rights.
	KindRights = "rights"
	// KindUnenforceable: a kernel could not enforce a rule of the policy
	// (the enforcer refused, exit 125); nothing ran there.
	KindUnenforceable = "unenforceable"
)

// Difference is one way the two kernels disagree.
type Difference struct {
	Kind string `json:"kind"`
	// Call and Objects name the call (refused-on-one, rights).
	Call    string   `json:"call,omitempty"`
	Objects []string `json:"objects,omitempty"`
	// A and B are each kernel's refusal of the call; nil where that kernel
	// allowed it.
	A *engine.Refusal `json:"a"`
	B *engine.Refusal `json:"b"`
	// Side is the kernel that could not enforce Rules (0 for A, 1 for B;
	// unenforceable only).
	Side  int           `json:"side"`
	Rules []engine.Rule `json:"rules,omitempty"`
	// Summary says the difference in one line.
	Summary string `json:"summary"`
}

// Pair is a refusal both kernels made alike.
type Pair struct {
	A engine.Refusal `json:"a"`
	B engine.Refusal `json:"b"`
}

// Side is one kernel's observation and, for a guest, the guest's
// provenance.
type Side struct {
	*engine.Observation
	// Guest describes the guest the side ran in (nil for the host).
	Guest *harness.GuestInfo `json:"guest,omitempty"`
}

// Result is the comparison of two observations.
type Result struct {
	Schema int `json:"schema"`
	// Status is StatusSame, StatusDiffer or StatusIndeterminate.
	Status int `json:"status"`
	// Reason says why the result is indeterminate.
	Reason      string       `json:"reason,omitempty"`
	Kernels     [2]*Side     `json:"kernels"`
	Differences []Difference `json:"differences"`
	Same        []Pair       `json:"same"`
	// Command and PolicyHash identify what ran.
	Command    []string `json:"command"`
	PolicyHash string   `json:"policy_hash"`
}

// Compare lines up two observations' refusals call by call. An
// indeterminate side makes the result indeterminate (its differences are
// still listed as far as they go).
func Compare(a, b *engine.Observation) *Result {
	a.Normalise()
	b.Normalise()
	res := &Result{Schema: ResultSchema, Kernels: [2]*Side{{Observation: a}, {Observation: b}}, Differences: []Difference{}, Same: []Pair{}}
	unenforceable := len(a.Unenforceable) > 0 || len(b.Unenforceable) > 0
	for side, o := range res.Kernels {
		other := res.Kernels[1-side]
		var only []engine.Rule
		var names []string
		for _, r := range o.Unenforceable {
			if !slices.ContainsFunc(other.Unenforceable, func(x engine.Rule) bool { return x.Rule == r.Rule }) {
				only = append(only, r)
				names = append(names, r.String())
			}
		}
		if len(only) > 0 {
			res.Differences = append(res.Differences, Difference{Kind: KindUnenforceable, Side: side, Rules: only,
				Summary: fmt.Sprintf("%s (Landlock ABI %d) cannot enforce %s; nothing ran there", o.Kernel, o.ABI, strings.Join(names, ", "))})
		}
	}
	if !unenforceable {
		res.Differences, res.Same = lineUp(a, b)
	}
	var reasons []string
	if len(a.Unenforceable) > 0 && len(res.Differences) == 0 {
		reasons = append(reasons, "neither kernel could enforce the policy, so nothing ran on either")
	}
	for _, o := range res.Kernels {
		if o.Indeterminate != "" {
			reasons = append(reasons, o.Kernel+": "+o.Indeterminate)
		}
	}
	switch {
	case len(reasons) > 0:
		res.Status, res.Reason = StatusIndeterminate, strings.Join(reasons, "; ")
	case len(res.Differences) > 0:
		res.Status = StatusDiffer
	default:
		res.Status = StatusSame
	}
	return res
}

// lineUp pairs the n-th refusal of each (call, layer, objects) on one side
// with the n-th on the other, in trace order.
func lineUp(a, b *engine.Observation) ([]Difference, []Pair) {
	diffs, same := []Difference{}, []Pair{}
	byKey := map[string][]int{}
	for i := range b.Refusals {
		k := key(&b.Refusals[i])
		byKey[k] = append(byKey[k], i)
	}
	usedB := make([]bool, len(b.Refusals))
	for i := range a.Refusals {
		ra := a.Refusals[i]
		k := key(&ra)
		if len(byKey[k]) == 0 {
			diffs = append(diffs, refusedOnOne(a, b, &ra, nil))
			continue
		}
		j := byKey[k][0]
		byKey[k] = byKey[k][1:]
		usedB[j] = true
		rb := b.Refusals[j]
		if !slices.Equal(ra.Rights, rb.Rights) {
			diffs = append(diffs, Difference{Kind: KindRights, Call: ra.Call, Objects: ra.Objects, A: &ra, B: &rb,
				Summary: fmt.Sprintf("%s %s: %s refused %s, %s refused %s", ra.Call, strings.Join(ra.Objects, " "),
					a.Kernel, strings.Join(ra.Rights, ","), b.Kernel, strings.Join(rb.Rights, ","))})
			continue
		}
		same = append(same, Pair{A: ra, B: rb})
	}
	for j := range b.Refusals {
		if !usedB[j] {
			rb := b.Refusals[j]
			diffs = append(diffs, refusedOnOne(a, b, nil, &rb))
		}
	}
	return diffs, same
}

func refusedOnOne(a, b *engine.Observation, ra, rb *engine.Refusal) Difference {
	r, by, other := ra, a, b
	if r == nil {
		r, by, other = rb, b, a
	}
	return Difference{Kind: KindRefusedOnOne, Call: r.Call, Objects: r.Objects, A: ra, B: rb,
		Summary: fmt.Sprintf("%s %s: refused on %s (%s), allowed on %s; granted by %s", r.Call, strings.Join(r.Objects, " "),
			by.Kernel, strings.Join(r.Rights, ","), other.Kernel, strings.Join(r.Grant, ", "))}
}

// key is how refusals are lined up across kernels: the same call on the same
// objects in the same layer.
func key(r *engine.Refusal) string {
	return r.Call + "\x00" + r.Layer + "\x00" + strings.Join(r.Objects, "\x00")
}
