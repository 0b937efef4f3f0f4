package search

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// DefaultRounds is Grow's budget when GrowOptions.Rounds is 0.
const DefaultRounds = 40

// ErrAbort marks a search that cannot produce a policy; AbortError wraps it.
var ErrAbort = errors.New("the prune aborted")

// AbortError is why a search stopped without a policy; Reason is one line,
// as the abort record carries it.
type AbortError struct{ Reason string }

func (e *AbortError) Error() string { return e.Reason }

// Unwrap makes errors.Is(err, ErrAbort) hold.
func (e *AbortError) Unwrap() error { return ErrAbort }

func abortf(format string, a ...any) error { return &AbortError{Reason: fmt.Sprintf(format, a...)} }

// Outcome is what one run of the exercise under a policy showed.
type Outcome struct {
	// Matched says the run had the reference's outcome (verdict.Same).
	Matched bool
	// Grants is what the run's confirmed refusals prove, placed and
	// generalised (observed runs only; nil when none or unobserved).
	Grants *policy.Policy
}

// RunFunc runs the exercise once under p; observed asks for the trace and
// Outcome.Grants. An error is the runner's own failure (not the exercise's)
// and stops the search.
type RunFunc func(ctx context.Context, p *policy.Policy, observed bool) (Outcome, error)

// GrowOptions configures Grow.
type GrowOptions struct {
	// Start is the first policy (nil: one that grants nothing).
	Start *policy.Policy
	// Rounds is the budget of observed runs; 0 means DefaultRounds.
	Rounds int
	// Run runs the exercise. Required.
	Run RunFunc
	// Prepare, if set, is applied to every candidate before it runs (the
	// pipeline's execute narrowing and hierarchy rule).
	Prepare func(*policy.Policy) (*policy.Policy, error)
}

// GrowResult is what Grow found.
type GrowResult struct {
	Policy *policy.Policy
	// Rounds is the number of observed runs; Reruns of unobserved ones.
	Rounds, Reruns int
	// Failed are the policies that ran and did not match, in order (the
	// first is Start): Minimise's known failures.
	Failed []*policy.Policy
	// Added lists, per round that added grants, the items it added.
	Added [][]Item
}

// Grow runs the exercise observed and adds what its refusals prove until it
// matches the reference. The error wraps ErrAbort when the exercise must
// abort (see the package documentation).
func Grow(ctx context.Context, opts GrowOptions) (*GrowResult, error) {
	if opts.Run == nil {
		return nil, errors.New("search: GrowOptions.Run is nil")
	}
	rounds := opts.Rounds
	if rounds <= 0 {
		rounds = DefaultRounds
	}
	p := opts.Start.Clone()
	if p == nil {
		p = &policy.Policy{}
	}
	res := &GrowResult{}
	for res.Rounds < rounds {
		cand := p
		if opts.Prepare != nil {
			var err error
			if cand, err = opts.Prepare(p); err != nil {
				return res, fmt.Errorf("preparing the round %d candidate: %w", res.Rounds+1, err)
			}
		}
		res.Rounds++
		o, err := opts.Run(ctx, cand, true)
		if err != nil {
			return res, fmt.Errorf("grow round %d: %w", res.Rounds, err)
		}
		if o.Matched {
			res.Policy = p
			return res, nil
		}
		res.Failed = append(res.Failed, p.Clone())
		fresh := freshItems(o.Grants, p)
		if len(fresh) == 0 {
			return rerun(ctx, opts, res, o, cand, p)
		}
		res.Added = append(res.Added, fresh)
		p = grow(p, fresh, o.Grants)
	}
	return res, abortf("did not converge within the grow budget of %d rounds", rounds)
}

// freshItems are the items of grants that p does not cover yet.
func freshItems(grants, p *policy.Policy) []Item {
	var fresh []Item
	for _, it := range Items(grants) {
		if !it.coveredBy(p) {
			fresh = append(fresh, it)
		}
	}
	return fresh
}

// rerun ends a round whose refusals proved nothing new: an abort when they
// proved grants p already holds, else one unobserved rerun of cand, which
// either matches (p is the policy) or aborts for want of a denial.
func rerun(ctx context.Context, opts GrowOptions, res *GrowResult, o Outcome, cand, p *policy.Policy) (*GrowResult, error) {
	if n := len(Items(o.Grants)); n > 0 {
		return res, abortf("a refusal survived its own grant (round %d: %d grants already held)", res.Rounds, n)
	}
	res.Reruns++
	o2, err := opts.Run(ctx, cand, false)
	if err != nil {
		return res, fmt.Errorf("grow round %d rerun: %w", res.Rounds, err)
	}
	if o2.Matched {
		res.Policy = p
		return res, nil
	}
	return res, abortf("the run failed without an attributable denial (grow round %d)", res.Rounds)
}

// grow is p with fresh added; a path of it without a comment takes the
// one grants gives it.
func grow(p *policy.Policy, fresh []Item, grants *policy.Policy) *policy.Policy {
	p = Build(append(Items(p), fresh...), p)
	for q, c := range grants.Comments {
		if p.FS[q] != nil && p.Comments[q] == "" {
			if p.Comments == nil {
				p.Comments = map[string]string{}
			}
			p.Comments[q] = c
		}
	}
	return p
}

// Item is one grant Minimise can drop: a (path, section) pair, or one
// [connect] or [bind] rule (Rule in canonical form).
type Item struct {
	Section policy.Section
	Path    string
	Rule    string
}

func (it Item) String() string {
	if it.Path != "" {
		return fmt.Sprintf("[%s] %s", it.Section, it.Path)
	}
	return fmt.Sprintf("[%s] %s", it.Section, it.Rule)
}

func (it Item) coveredBy(p *policy.Policy) bool {
	if it.Path != "" {
		return placement.Covered(p, it.Path, it.Section)
	}
	for _, it2 := range Items(p) {
		if it2 == it {
			return true
		}
	}
	return false
}

// Items lists a policy's grants as items: paths in sorted order with their
// sections in canonical order, then [connect] and [bind] rules in policy
// order. Limits are not items.
func Items(p *policy.Policy) []Item {
	if p == nil {
		return nil
	}
	var out []Item
	paths := make([]string, 0, len(p.FS))
	for q := range p.FS {
		paths = append(paths, q)
	}
	sort.Strings(paths)
	for _, q := range paths {
		for _, s := range policy.FilesystemSections {
			if p.FS[q][s] {
				out = append(out, Item{Section: s, Path: q})
			}
		}
	}
	for _, r := range p.Connect {
		out = append(out, Item{Section: policy.Connect, Rule: r.String()})
	}
	for _, r := range p.Bind {
		out = append(out, Item{Section: policy.Bind, Rule: r.String()})
	}
	return out
}

// Build makes a policy granting exactly items, with template's limits,
// header, comments (of kept paths and rules) and network rule details.
func Build(items []Item, template *policy.Policy) *policy.Policy {
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{}}
	conn := map[string]policy.ConnectRule{}
	bind := map[string]policy.BindRule{}
	if template != nil {
		for _, r := range template.Connect {
			conn[r.String()] = r
		}
		for _, r := range template.Bind {
			bind[r.String()] = r
		}
		if template.Limits != nil {
			p.Limits = map[policy.LimitKey]policy.Limit{}
			for k, v := range template.Limits {
				p.Limits[k] = v
			}
		}
		p.Header = append([]string(nil), template.Header...)
	}
	seen := map[Item]bool{}
	for _, it := range items {
		if seen[it] {
			continue
		}
		seen[it] = true
		switch {
		case it.Path != "":
			if p.FS[it.Path] == nil {
				p.FS[it.Path] = map[policy.Section]bool{}
			}
			p.FS[it.Path][it.Section] = true
			if template != nil && template.Comments[it.Path] != "" {
				if p.Comments == nil {
					p.Comments = map[string]string{}
				}
				p.Comments[it.Path] = template.Comments[it.Path]
			}
		case it.Section == policy.Connect:
			r, ok := conn[it.Rule]
			if !ok {
				r = parseConnect(it.Rule)
			}
			p.Connect = append(p.Connect, r)
		case it.Section == policy.Bind:
			r, ok := bind[it.Rule]
			if !ok {
				r = parseBind(it.Rule)
			}
			p.Bind = append(p.Bind, r)
		}
	}
	return p
}

func parseConnect(row string) policy.ConnectRule {
	p, err := policy.Parse("item", []byte("[connect]\n"+row+"\n"))
	if err != nil || len(p.Connect) != 1 {
		panic("search: item holds no connect rule: " + row)
	}
	return p.Connect[0]
}

func parseBind(row string) policy.BindRule {
	p, err := policy.Parse("item", []byte("[bind]\n"+row+"\n"))
	if err != nil || len(p.Bind) != 1 {
		panic("search: item holds no bind rule: " + row)
	}
	return p.Bind[0]
}

// TryFunc runs the exercise with exactly the kept items and reports whether
// it matched the reference.
type TryFunc func(ctx context.Context, kept []Item) (bool, error)

// MinimiseStats counts Minimise's work.
type MinimiseStats struct {
	Before, Kept int
	// Trials are removals tried with at least one run; Runs the runs they
	// took; Skipped the removals decided without a run (a known failure).
	Trials, Runs, Skipped int
	Removed               []Item
}

// Minimise drops every item whose removal two consecutive runs pass without
// (see the package documentation). knownFailed are item sets a run already
// failed with; a removal leaving a subset of one is split without running.
// The kept items keep their order.
func Minimise(ctx context.Context, items []Item, knownFailed [][]Item, try TryFunc) ([]Item, MinimiseStats, error) {
	m := newMinimiser(items, knownFailed, try)
	if len(items) > 0 {
		all := make([]int, len(items))
		for i := range all {
			all[i] = i
		}
		if err := m.tryRemoval(ctx, all); err != nil {
			return nil, m.st, err
		}
	}
	var out []Item
	for i, k := range m.kept {
		if k {
			out = append(out, items[i])
		} else {
			m.st.Removed = append(m.st.Removed, items[i])
		}
	}
	m.st.Kept = len(out)
	return out, m.st, nil
}

// minimiser is Minimise's state: items are named by their index.
type minimiser struct {
	items []Item
	try   TryFunc
	kept  []bool
	// failed are the index sets a run failed with.
	failed []map[int]bool
	st     MinimiseStats
}

func newMinimiser(items []Item, knownFailed [][]Item, try TryFunc) *minimiser {
	m := &minimiser{items: items, try: try, kept: make([]bool, len(items)), st: MinimiseStats{Before: len(items)}}
	for i := range m.kept {
		m.kept[i] = true
	}
	index := map[Item]int{}
	for i, it := range items {
		index[it] = i
	}
	for _, set := range knownFailed {
		f := map[int]bool{}
		for _, it := range set {
			if i, ok := index[it]; ok {
				f[i] = true
			}
		}
		m.failed = append(m.failed, f)
	}
	return m
}

// knownFail reports whether cand is a subset of a set a run failed with.
func (m *minimiser) knownFail(cand []int) bool {
next:
	for _, f := range m.failed {
		for _, i := range cand {
			if !f[i] {
				continue next
			}
		}
		return true
	}
	return false
}

// candidate is the kept items without drop, as indices and as items.
func (m *minimiser) candidate(drop []int) ([]int, []Item) {
	d := map[int]bool{}
	for _, i := range drop {
		d[i] = true
	}
	var idx []int
	var its []Item
	for i, k := range m.kept {
		if k && !d[i] {
			idx = append(idx, i)
			its = append(its, m.items[i])
		}
	}
	return idx, its
}

// tryRemoval drops node when the candidate without it passes twice in a
// row; otherwise it records the failure and tries each half of node.
func (m *minimiser) tryRemoval(ctx context.Context, node []int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	idx, its := m.candidate(node)
	if m.knownFail(idx) {
		m.st.Skipped++
	} else {
		m.st.Trials++
		ok, err := m.passesTwice(ctx, its)
		if err != nil {
			return err
		}
		if ok {
			for _, i := range node {
				m.kept[i] = false
			}
			return nil
		}
		f := map[int]bool{}
		for _, i := range idx {
			f[i] = true
		}
		m.failed = append(m.failed, f)
	}
	if len(node) == 1 {
		return nil
	}
	half := len(node) / 2
	left := append([]int(nil), node[:half]...)
	right := append([]int(nil), node[half:]...)
	if err := m.tryRemoval(ctx, left); err != nil {
		return err
	}
	return m.tryRemoval(ctx, right)
}

// passesTwice runs the candidate until it fails or has passed twice.
func (m *minimiser) passesTwice(ctx context.Context, its []Item) (bool, error) {
	for passes := 0; passes < 2; passes++ {
		m.st.Runs++
		ok, err := m.try(ctx, its)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// Describe lists items one per line, for records and messages.
func Describe(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}
