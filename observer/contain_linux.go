package observer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/observer/lane"
	"github.com/lockstep-sandbox/lockstep/record"
)

// contain runs evidence/contain's checks under final, the policy that
// settled: each canary unreadable, a read-only path
// unwritable, a loopback port no rule names neither reachable nor bindable,
// and each limit it can reach holding; each check with a control first
// succeeds without any sandbox. The probe is lockstep itself (`lockstep
// contain-probe`), run under `lockstep run` with the policy plus a grant to
// read and execute the probe binary. When final is the policy as read
// (asRead: no row was added), the timeout check is early's, which waited
// beside the exercise's runs (startTimeoutCheck); otherwise early is
// abandoned and every check runs here under final.
func (v *verification) contain(ctx context.Context, final, asRead *policy.Policy, early *contain.Early) ([]record.ContainmentCheck, []string, error) {
	v.o.progress("%s: containment checks", v.ex.Name)
	c := v.containUncounted(ctx, final, asRead, early)
	return v.keepContainment(&c)
}

// containment is the containment checks' outcome, their probe operations
// not yet counted in the exercise's runs.
type containment struct {
	checks []record.ContainmentCheck
	failed []string
	err    error
	probes int64
}

// containUncounted runs the containment checks under final (contain),
// counting their probe operations in the outcome rather than the runs.
func (v *verification) containUncounted(ctx context.Context, final, asRead *policy.Policy, early *contain.Early) containment {
	var probes atomic.Int64
	s := v.containSetup()
	s.Ran = func() { probes.Add(1) }
	var c containment
	if final != asRead {
		early.Stop()
		c.checks, c.failed, c.err = contain.Execute(ctx, final, s)
	} else {
		c.checks, c.failed, c.err = early.Finish(ctx, final, s)
	}
	c.probes = probes.Load()
	return c
}

// keepContainment counts c's probe operations in the exercise's runs and
// returns its outcome.
func (v *verification) keepContainment(c *containment) ([]record.ContainmentCheck, []string, error) {
	v.es.Runs["containment probe"] += int(c.probes)
	return c.checks, c.failed, c.err
}

// containSetup is how the observer's containment checks run their probes;
// the caller counts them (Setup.Ran).
func (v *verification) containSetup() contain.Setup {
	o := v.o
	return contain.Setup{
		Probe: []string{o.exe, contain.Verb}, Enforcer: enforcer.Prefix(o.runExe, false),
		WorkDir: o.work, ScratchDir: o.scratch, Env: exercise.DefaultEnv(o.work),
	}
}

// startTimeoutCheck starts the containment's timeout check under p, the
// policy as read, before the exercise's first run (contain.StartEarly): the
// limits it checks are the policy's own, which the ABI-10 rows never
// change. Its probe runs in a lane of its own, from a copy of the exercise
// made here (earlyCopy): the enforcer stats, then opens, every path the
// policy names to build the ruleset, and the first run's fresh copy
// empties the working directory in place, so a probe started there could
// lose a path between the two and never start. Without lanes (no
// CAP_SYS_ADMIN) or a copy it returns nil: the check then runs with the
// others, after the runs (contain.Early.Finish).
func (v *verification) startTimeoutCheck(ctx context.Context, p *policy.Policy) *contain.Early {
	if v.o.opts.Lanes < 1 {
		return nil
	}
	copyDir, err := v.earlyCopy()
	if err != nil {
		v.o.log.Warn("observe: the timeout check runs with the other checks", "err", err)
		return nil
	}
	s := v.containSetup()
	s.Enforcer = append(lane.Command([]string{v.o.runExe}, copyDir, v.o.work, nil), s.Enforcer...)
	return contain.StartEarly(ctx, p, s, contain.TimeoutCheck)
}

// earlyCopy makes the early timeout check's copy of the exercise, apart
// from the lanes the runs use, and the working directory its lane binds it
// over.
func (v *verification) earlyCopy() (string, error) {
	if err := os.MkdirAll(v.o.work, 0o755); err != nil {
		return "", fmt.Errorf("the working directory the early check's lane binds over: %w", err)
	}
	copyDir := filepath.Join(v.o.scratch, "lanes", "early", filepath.Base(v.o.work))
	return copyDir, exercise.FreshCopy(v.ex.Dir, copyDir)
}
