package prune

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/derive/limits"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
	"github.com/lockstep-sandbox/lockstep/record"
)

// Limits stage budget.
const (
	measurementRuns = 3
	limitRaises     = 3
)

// ContainOptions configures the containment checks. The zero value plants
// contain.DefaultCanaries and caps the timeout and CPU checks at
// contain.DefaultMaxSeconds.
type ContainOptions struct {
	// Canaries are the canaries' templates; nil means
	// contain.DefaultCanaries. The containment checks plant a file of
	// their own for each and remove it again (contain.Setup.Canaries).
	Canaries []string
	// MaxSeconds caps the timeout and cpu checks; 0 means the default.
	MaxSeconds int
	// Probe is the probe's argv prefix; nil means {Enforcer[0],
	// contain.Verb}: lockstep itself, or the program that calls ServeRoles.
	Probe []string
}

func (s *state) canaries() []string {
	if s.opts.Contain.Canaries != nil {
		return s.opts.Contain.Canaries
	}
	return contain.DefaultCanaries
}

// sampledRun is s.run with a sampler measuring the run's own process tree
// (the enforcer that wraps the command not counted).
func (s *state) sampledRun(ctx context.Context, stage, shape string, p *policy.Policy, observed bool) (*exercise.Result, limits.Measurement, error) {
	skip, _ := filepath.EvalSymlinks(s.enforcer[0])
	smp := limits.StartTree("", skip)
	s.onStart = smp.Watch
	res, _, err := s.run(ctx, stage, shape, p, observed)
	s.onStart = nil
	return res, smp.Stop(), err
}

// limits measures the exercise under p and derives [limits].
func (s *state) limits(ctx context.Context, p *policy.Policy) (*policy.Policy, error) {
	var ms []limits.Measurement
	for i := 1; i <= measurementRuns; i++ {
		runStart := time.Now()
		res, m, err := s.sampledRun(ctx, "limits measurement", "SAMPLED", p, false)
		if err != nil {
			return nil, err
		}
		if !res.Verdict.Same(s.ref.Verdict) {
			return nil, &search.AbortError{Reason: fmt.Sprintf("the limits measurement run %d differs from the reference", i)}
		}
		m.WallSeconds = res.Duration.Seconds()
		m.LargestFileMB = limits.LargestFileMB(p, runStart)
		ms = append(ms, m)
	}
	lo := limits.Options{HeapPinned: s.ex.Config.HeapPinned, AddressSpaceUnbounded: s.ex.Config.AddressSpaceUnbounded}
	derived := limits.Margins(limits.Max(ms...), lo)
	note := "mem_mb not derived (heap_pinned is false): the grading default applies"
	if lo.AddressSpaceUnbounded {
		note = "mem_mb=0: the exercise declares address_space_unbounded"
	} else if lo.HeapPinned {
		note = "mem_mb derived: the exercise declares heap_pinned"
	}
	s.entry("limits", map[string]any{"measurements": ms, "derived": limitStrings(derived), "mem_mb": note})
	raised := map[policy.LimitKey]int{}
	for {
		q := p.Clone()
		q.Limits = derived
		status, ok := 0, true
		for i := 0; i < measurementRuns; i++ {
			res, _, err := s.run(ctx, "limits verification", "LIMITED", q, false)
			if err != nil {
				return nil, err
			}
			if !res.Verdict.Same(s.ref.Verdict) {
				status, ok = res.Status, false
				break
			}
		}
		if ok {
			return q, nil
		}
		res, m, err := s.sampledRun(ctx, "limits diagnosis", "OBSERVED_LIMITED", q, true)
		if err != nil {
			return nil, err
		}
		if res.Verdict.Same(s.ref.Verdict) {
			res.Status = status
		}
		k := limits.Signature(res.Status, m.CPUSeconds, derived, s.limitHits)
		if k == "" {
			return nil, &search.AbortError{Reason: fmt.Sprintf("failed under limits without a limit signature (status %d)", res.Status)}
		}
		raised[k]++
		if raised[k] > limitRaises {
			return nil, &search.AbortError{Reason: fmt.Sprintf("limits did not settle: %s doubled %d times", k, limitRaises)}
		}
		derived = limits.Double(derived, k)
		s.entry("limit raised", map[string]any{"limit": string(k), "value": derived[k].Format(k)})
	}
}

func limitStrings(l map[policy.LimitKey]policy.Limit) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.Format(k)
	}
	return out
}

// limitHitsOf collects the limits an observed run's refusals ran into.
func limitHitsOf(rs []*attribute.Refusal) []policy.LimitKey {
	var out []policy.LimitKey
	for _, r := range rs {
		if r.Layer == attribute.Limit && r.Limit != "" {
			out = append(out, r.Limit)
		}
	}
	return out
}

// contain runs the containment checks on the final policy.
func (s *state) contain(ctx context.Context, p *policy.Policy) error {
	probe := s.opts.Contain.Probe
	if probe == nil {
		probe = []string{s.enforcer[0], contain.Verb}
	}
	res, failed, err := contain.Execute(ctx, p, contain.Setup{
		Probe: probe, Enforcer: s.enforcer, Canaries: s.canaries(), WorkDir: s.workDir, ScratchDir: s.scratch,
		MaxSeconds: s.opts.Contain.MaxSeconds, Env: exercise.DefaultEnv(s.workDir), Timeout: contain.DefaultProbeTimeout,
	})
	if err != nil {
		return err
	}
	un := 0
	for _, c := range res {
		if c.Unchecked != "" && c.Control == "" {
			un++
		}
	}
	s.logf("containment: %d checks held or failed, %d unchecked, %d did not hold", len(res)-un, un, len(failed))
	s.entry("containment", record.ContainmentEntry{Checks: res})
	if len(failed) > 0 {
		return &search.AbortError{Reason: "containment checks did not hold: " + strings.Join(failed, "; ")}
	}
	return nil
}
