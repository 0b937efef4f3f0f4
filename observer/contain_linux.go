package observer

import (
	"context"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/contain"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/record"
)

// contain runs pruner/contain's checks under p, the policy that settled
// (Phobos's KVM run has none): each canary unreadable, a read-only path
// unwritable, a loopback port no rule names neither reachable nor bindable,
// and each limit it can reach holding; each check with a control first
// succeeds without any sandbox. The probe is lockstep itself (`lockstep
// contain-probe`), run under `lockstep run` with p plus a grant to read and
// execute the probe binary.
func (v *verification) contain(ctx context.Context, p *policy.Policy) ([]record.ContainmentCheck, []string, error) {
	o := v.o
	o.progress("%s: containment checks", v.ex.Name)
	return contain.Execute(ctx, p, contain.Setup{
		Probe: []string{o.exe, contain.Verb}, Enforcer: enforcer.Prefix(o.exe, false),
		WorkDir: o.work, ScratchDir: o.scratch, Env: exercise.DefaultEnv(o.work),
		Ran: func() { v.es.Runs["containment probe"]++ },
	})
}
