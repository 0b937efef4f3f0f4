package observer

import (
	"context"
	"sync/atomic"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/contain"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/record"
)

// contain runs pruner/contain's checks under final, the policy that settled
// (Phobos's KVM run has none): each canary unreadable, a read-only path
// unwritable, a loopback port no rule names neither reachable nor bindable,
// and each limit it can reach holding; each check with a control first
// succeeds without any sandbox. The probe is lockstep itself (`lockstep
// contain-probe`), run under `lockstep run` with the policy plus a grant to
// read and execute the probe binary. When final is the policy as read
// (asRead: no row was added), the timeout check is early's, which waited
// beside the exercise's runs (startTimeoutCheck); otherwise early is
// abandoned and every check runs here under final.
func (v *verification) contain(ctx context.Context, final, asRead *policy.Policy, early *earlyCheck) ([]record.ContainmentCheck, []string, error) {
	v.o.progress("%s: containment checks", v.ex.Name)
	s := v.containSetup(func() { v.es.Runs["containment probe"]++ })
	if early == nil || final != asRead {
		early.stop()
		return contain.Execute(ctx, final, s)
	}
	checks, failed, err := early.Finish(ctx, final, s)
	v.es.Runs["containment probe"] += int(early.probes.Load())
	return checks, failed, err
}

// containSetup is how the observer's containment checks run their probes;
// ran counts each probe operation.
func (v *verification) containSetup(ran func()) contain.Setup {
	o := v.o
	return contain.Setup{
		Probe: []string{o.exe, contain.Verb}, Enforcer: enforcer.Prefix(o.exe, false),
		WorkDir: o.work, ScratchDir: o.scratch, Env: exercise.DefaultEnv(o.work), Ran: ran,
	}
}

// earlyCheck is the containment's timeout check started before the
// exercise's first run, under the policy as read (contain.StartEarly), with
// its own count of probe operations (it runs beside the runs, which count
// theirs in the exercise's summary). The limits it checks are the
// policy's own, which the ABI-10 rows never change.
type earlyCheck struct {
	*contain.Early
	probes atomic.Int64
}

// startTimeoutCheck starts the timeout check under p.
func (v *verification) startTimeoutCheck(ctx context.Context, p *policy.Policy) *earlyCheck {
	e := &earlyCheck{}
	e.Early = contain.StartEarly(ctx, p, v.containSetup(func() { e.probes.Add(1) }), contain.TimeoutCheck)
	return e
}

// stop abandons the check if it still runs; nil is stopped.
func (e *earlyCheck) stop() {
	if e != nil {
		e.Stop()
	}
}
