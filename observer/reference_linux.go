package observer

import (
	"context"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
)

// referenceAndCrossCheck makes the guest's own reference, ReferenceRuns
// unsandboxed runs that must run tests and agree, and the cross-check,
// which needs no result of theirs. The first reference run runs alone: it
// anchors the verification, and one that cannot costs nothing more. With
// lanes to spare (besideLanes) the cross-check then runs in the working
// directory itself, on the CPU a traced run keeps (pinOneCPU), while the
// other reference runs run in lanes on the other CPUs. Everything is judged
// in the order of runs one after another: the reference first, and a
// reference that does not hold discards the cross-check (which it stops).
func (v *verification) referenceAndCrossCheck(ctx context.Context, p *policy.Policy) (string, error) {
	n, name := v.o.opts.ReferenceRuns, v.referenceRun
	v.o.progress("%s: %s", v.ex.Name, name(0))
	first, err := v.exRun(ctx, "reference", nil)
	if err != nil {
		return "", err
	}
	done := []*exercise.Result{first}
	lanes, cpus := v.besideLanes(n-1, first)
	if v.referenceProblem(done) != nil || lanes == 0 {
		if err := v.referenceFrom(ctx, done); err != nil {
			return "", err
		}
		return v.crossCheck(ctx, p)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	refs := schedule.Go(cctx, v.o.steps, "reference runs beside the cross-check", func(ctx context.Context) ([]*exercise.Result, error) {
		rest, err := v.laneRuns(ctx, nil, 1, n, lanes, name, cpus)
		if err != nil || !referenceAgrees(append(done[:1:1], rest...)) {
			// The cross-check is discarded: no need to finish it.
			v.o.steps.Note("cross-check run", schedule.Cancelled)
			cancel()
		}
		return rest, err
	})
	// The cross-check's time-out, if any, counts after the reference's:
	// it is its own until the reference runs are settled.
	var crossStopped *engine.TimeoutError
	ob, removed, crossErr := v.crossCheckRun(cctx, p, &crossStopped)
	rest, err := refs.Keep()
	if err != nil {
		return "", err
	}
	for _, res := range rest {
		if err := v.account("reference", true, res); err != nil {
			return "", err
		}
	}
	if err := v.settleReference(append(done, rest...)); err != nil {
		return "", err
	}
	if v.stopped == nil {
		v.stopped = crossStopped
	}
	return v.crossCheckJudge(ob, removed, crossErr)
}

// reference makes the reference runs with nothing beside them.
func (v *verification) reference(ctx context.Context) error { return v.referenceFrom(ctx, nil) }

// referenceFrom makes the reference runs after those done (a phase of
// their own) and settles them.
func (v *verification) referenceFrom(ctx context.Context, done []*exercise.Result) error {
	results, err := v.runPhase(ctx, phase{kind: "reference", n: v.o.opts.ReferenceRuns, name: v.referenceRun,
		enough: func(done []*exercise.Result) bool { return v.referenceProblem(done) != nil }}, done)
	if err != nil {
		return err
	}
	return v.settleReference(results)
}

// referenceRun names reference run i in progress lines.
func (v *verification) referenceRun(i int) string {
	return fmt.Sprintf("reference run %d/%d", i+1, v.o.opts.ReferenceRuns)
}

// settleReference judges the reference runs (referenceProblem) and, when
// they hold, keeps their times and the first as the reference.
func (v *verification) settleReference(results []*exercise.Result) error {
	if err := v.referenceProblem(results); err != nil {
		return err
	}
	for _, res := range results {
		v.es.Reference = append(v.es.Reference, res.Duration.Seconds())
	}
	v.ref = results[0]
	return nil
}

// referenceAgrees reports whether reference runs can hold so far: none
// ran out of time, the first can anchor and the rest agree with it
// (referenceProblem without its errors, for a goroutine that must not read
// the verification's state).
func referenceAgrees(results []*exercise.Result) bool {
	for i, res := range results {
		switch {
		case res.Verdict.ExitClass == verdict.Timeout:
			return false
		case i == 0 && res.Verdict.ReferenceProblem() != nil:
			return false
		case i > 0 && !res.Verdict.Same(results[0].Verdict):
			return false
		}
	}
	return true
}

// besideLanes is how many lanes the reference runs after the first get
// while the cross-check runs beside them, and the CPUs they may use: 0
// when the observer has no lane to spare (one lane is the cross-check's
// CPU), or the guest's free memory does not hold one more run, judged as
// lanes judges it.
func (v *verification) besideLanes(rest int, first *exercise.Result) (int, []int) {
	if rest == 0 || v.o.opts.Lanes < 2 {
		return 0, nil
	}
	avail, ok := machine.MeminfoMB("MemAvailable")["MemAvailable"]
	if !ok {
		return 0, nil
	}
	n := lanesFor(min(v.o.opts.Lanes, rest+1), avail, first.MaxRSSKiB) - 1
	if n < 1 {
		return 0, nil
	}
	if !v.o.opts.OneCPU {
		return n, nil
	}
	cpus, err := besideCPUs()
	if err != nil || len(cpus) == 0 {
		v.o.log.Warn("observe: no CPU beside the traced run's; the reference runs go first", "err", err)
		return 0, nil
	}
	return min(n, len(cpus)), cpus
}

// referenceProblem is the abort the reference runs so far call for, in
// order: a run out of time, a first run that cannot anchor the
// verification, or a later run that differs from the first; nil if none.
func (v *verification) referenceProblem(results []*exercise.Result) error {
	for i, res := range results {
		if res.Verdict.ExitClass == verdict.Timeout {
			return v.stopped
		}
		if i == 0 {
			if prob := res.Verdict.ReferenceProblem(); prob != nil {
				return engine.Abortf(map[string]any{"verdict": res.Verdict, "status": res.Status, "log": tail(res.Log)},
					"the reference run ran no tests or failed for an infrastructure reason: %v", prob)
			}
			continue
		}
		if !res.Verdict.Same(results[0].Verdict) {
			// The run's status and log say why it differs (a build that
			// died, a test that failed), which the verdicts alone do not.
			return engine.Abortf(map[string]any{"first": results[0].Verdict, "run": i + 1, "verdict": res.Verdict,
				"status": res.Status, "seconds": res.Duration.Seconds(), "log": tail(res.Log)},
				"flaky reference: reference run %d differs from the first", i+1)
		}
	}
	return nil
}
