package observer

import (
	"context"
	"slices"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/contain"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/verdict"
)

// A besideJob is work of the ABI-10 phase that needs no result of a
// round's first joint run but whether it is wanted: the diagnosis run
// (wanted when that run differs) or the containment checks (wanted when the
// round settles). The cross-check foretells which (foretell), and the job
// then runs in the working directory while the first joint run runs in a
// lane on the other CPUs (firstJointBeside), instead of after it. A job not
// wanted is stopped and leaves nothing in the record: it counts no run and
// notes no time-out.
type besideJob struct {
	// what names the job in progress lines.
	what string
	// pins is set for a traced run, which keeps this process on one CPU
	// (pinOneCPU): the lane then gets the other CPUs.
	pins bool
	// wanted says whether the round's first joint run calls for the job.
	wanted func(first *exercise.Result) bool
	run    func(ctx context.Context)
	// kept is set when the first joint run wanted the job.
	kept   bool
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs the job in a goroutine of its own.
func (j *besideJob) start(ctx context.Context) {
	ctx, j.cancel = context.WithCancel(ctx)
	j.done = make(chan struct{})
	go func() {
		defer close(j.done)
		j.run(ctx)
	}()
}

// wait waits for the job to end.
func (j *besideJob) wait() { <-j.done }

// stop ends the job and waits for it; nothing it did is kept.
func (j *besideJob) stop() {
	j.cancel()
	<-j.done
}

// foretold are the UDP ports the cross-check's run was refused a bind to,
// by strace's attribution and a net.bind_udp record alike: a joint run
// under a policy without a rule for one of them will be refused the same
// bind and differ from the reference.
func foretold(ob *Observed) []int {
	_, ports, _ := Rows(difference(ob).Bind, ob.Denials, nil)
	return ports
}

// foretellsRow says whether the cross-check foretells that the joint runs
// under p differ: a port it was refused that p holds no rule for.
func (v *verification) foretellsRow(p *policy.Policy) bool {
	return slices.ContainsFunc(v.foretold, func(port int) bool { return !holds(p.Bind, port) })
}

// besideFirstJoint is the job for round's first joint run under p (asRead
// is the policy as read, for the containment), or nil:
// the diagnosis when the cross-check foretells a difference and a later
// round could use its rows, the containment checks when it foretells none;
// nil when it foretells a difference in the last round (which aborts), or
// the guest has no lane to spare or too little memory for one more run.
func (v *verification) besideFirstJoint(p, asRead *policy.Policy, round int, early *contain.Early, r *jointRound) *besideJob {
	if v.o.opts.Lanes < 2 || v.ref == nil {
		return nil
	}
	if !v.foretellsRow(p) {
		return v.containBeside(p, asRead, early, r)
	}
	if round == v.o.opts.Rounds {
		return nil
	}
	return v.diagnosisBeside(p, r)
}

// diagnosisBeside is the diagnosis run under p as a job: wanted when the
// first joint run differs from the reference and did not run out of time
// (stoppedJoint's observed run follows one that did). Its run is counted
// when it is taken (jointRound.takeDiagnosis).
func (v *verification) diagnosisBeside(p *policy.Policy, r *jointRound) *besideJob {
	d := &besideDiagnosis{}
	r.diagnosis = d
	timed, nth := v.timed(p), v.es.Runs["diagnosis"]+1
	return &besideJob{what: "diagnosis run (strace + audit)", pins: v.o.opts.OneCPU,
		wanted: func(first *exercise.Result) bool {
			return first.Verdict.ExitClass != verdict.Timeout && !first.Verdict.Same(v.ref.Verdict)
		},
		run: func(ctx context.Context) {
			d.ob, d.err = v.observeRun(ctx, "diagnosis", nth, timed, func(ctx context.Context, prefix []string) (*exercise.Result, error) {
				res, err := v.ex.Run(ctx, v.runOptions(prefix))
				d.res = res
				return res, err
			})
		}}
}

// besideDiagnosis is a diagnosis run made beside a first joint run, not yet
// counted.
type besideDiagnosis struct {
	ob  *Observed
	res *exercise.Result
	err error
}

// containBeside is the containment checks under p as a job: wanted when
// the first joint run agrees with the reference; kept when the whole round
// settles (jointRound.contained).
func (v *verification) containBeside(p, asRead *policy.Policy, early *contain.Early, r *jointRound) *besideJob {
	c := &containment{}
	r.contained = c
	return &besideJob{what: "containment checks",
		wanted: func(first *exercise.Result) bool { return first.Verdict.Same(v.ref.Verdict) },
		run:    func(ctx context.Context) { *c = v.containUncounted(ctx, p, asRead, early) }}
}

// firstJointBeside makes the round's first joint run behind prefix in a
// lane while job runs in the working directory, and accounts for the run.
// The job is stopped when the run does not want it, else left running:
// the caller waits for it. Without a lane to spare it returns nil, and the
// phase runs as it would without a job.
func (v *verification) firstJointBeside(ctx context.Context, prefix []string, name string, job *besideJob) (*exercise.Result, error) {
	lanes, cpus := v.besideLanes(1, v.ref)
	if lanes == 0 {
		return nil, nil
	}
	if !job.pins {
		cpus = nil
	}
	v.o.progress("%s: %s, beside %s", v.ex.Name, job.what, name)
	job.start(ctx)
	results, err := v.laneRuns(ctx, prefix, 0, 1, 1, func(int) string { return name }, cpus)
	if err == nil {
		err = v.account("joint", true, results[0])
	}
	if err != nil {
		job.stop()
		return nil, err
	}
	if job.kept = job.wanted(results[0]); !job.kept {
		job.stop()
		v.o.progress("%s: %s discarded: %s did not call for it", v.ex.Name, job.what, name)
	}
	return results[0], nil
}

// jointRound is one round of joint runs: the first that differs from the
// reference (nil when all agree), and what ran beside its first run.
type jointRound struct {
	diff      *exercise.Result
	job       *besideJob
	diagnosis *besideDiagnosis
	contained *containment
}

// settled ends the round: it waits for a job still running and keeps its
// outcome only when the round called for it (a containment when all runs
// agreed, a diagnosis when the first differed).
func (r *jointRound) settled() {
	if r.job == nil || !r.job.kept {
		r.diagnosis, r.contained = nil, nil
		return
	}
	r.job.wait()
	if r.diff != nil {
		r.contained = nil
	} else {
		r.diagnosis = nil
	}
}

// takeDiagnosis is the round's diagnosis: the one made beside the first
// joint run, counted now, or one made now.
func (v *verification) takeDiagnosis(ctx context.Context, r *jointRound, p *policy.Policy) (*Observed, error) {
	d := r.diagnosis
	if d == nil {
		return v.observe(ctx, "diagnosis", v.timed(p))
	}
	if d.res == nil {
		return d.ob, d.err
	}
	if err := v.account("diagnosis", true, d.res); err != nil {
		return d.ob, err
	}
	return d.ob, d.err
}
