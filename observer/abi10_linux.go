package observer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
)

// abi10 is the ABI-10 phase: joint runs with every layer and the policy's
// limits; a difference that is exactly a refused UDP bind, named by strace's
// rule and a net.bind_udp record, becomes a row; anything else aborts. It
// returns the policy that settled (p plus the rows) and, when they ran
// beside the last round's first joint run, its containment checks.
func (v *verification) abi10(ctx context.Context, p *policy.Policy, early *contain.Early) (*policy.Policy, *containment, error) {
	o, current := v.o, p
	var pre *exercise.Result
	for round := 1; round <= o.opts.Rounds; round++ {
		r, err := v.joint(ctx, jointSpec{p: current, asRead: p, round: round, early: early}, pre)
		if err != nil {
			return nil, nil, err
		}
		if r.diff == nil {
			return current, r.contained, nil
		}
		if v.stopped != nil {
			return nil, nil, v.stoppedJoint(ctx, current)
		}
		if round == o.opts.Rounds {
			break
		}
		if r.diagnosis != nil {
			o.progress("%s: ABI-10 round %d: the joint runs differ from the reference; the diagnosis run beside the first is kept", v.ex.Name, round)
		} else {
			o.progress("%s: ABI-10 round %d: the joint runs differ from the reference; diagnosis run (strace + audit)", v.ex.Name, round)
		}
		ob, err := v.takeDiagnosis(ctx, &r, current)
		if err != nil {
			return nil, nil, v.stoppedOr(ob, "diagnosis", err)
		}
		if v.stopped != nil {
			v.keepTrace("diagnosis", ob.Trace)
			return nil, nil, v.stopped
		}
		rows, ports, err := v.diagnosed(ob, current)
		if err != nil {
			return nil, nil, err
		}
		v.k.Rows = append(v.k.Rows, rows...)
		current = policy.WithBind(current, ports)
		pre = v.nextFor(&r, current, round+1)
	}
	return nil, nil, engine.Abortf(nil, "the joint verification on the guest kernel did not settle")
}

// diagnosed is the rows a diagnosis run of current found and their ports;
// a difference other than UDP binds current holds no rule for aborts.
func (v *verification) diagnosed(ob *engine.Observed, current *policy.Policy) ([]kvmrecord.Row, []int, error) {
	d := difference(ob)
	var connect []string
	for _, c := range d.Connect {
		if !strings.HasSuffix(c, " udp") {
			connect = append(connect, c)
		}
	}
	rows, ports, other := Rows(d.Bind, ob.Denials, current.Bind)
	// Filesystem and limit refusals are not differences by themselves
	// (the default prune leaves unneeded accesses refused); they only
	// leave the joint runs unsettled, which shows as no row.
	if len(other) > 0 || len(connect) > 0 || len(rows) == 0 {
		return nil, nil, engine.Abortf(map[string]any{"other_bind_rules": nonNil(other), "connect_rules": nonNil(connect),
			"other_refusals": nonNil(d.Other), "audit": rawRecords(ob.Audit.Records, 20)},
			"the guest kernel differs from the default prune's in more than a UDP bind port")
	}
	return rows, ports, nil
}

// jointSpec is one round of joint runs: its policy p with its limits,
// the policy as read (asRead, for the containment), the round's number and
// the early time-out check the containment takes.
type jointSpec struct {
	p, asRead *policy.Policy
	round     int
	early     *contain.Early
}

// joint runs JointRuns unobserved runs of round js; the round's diff is nil
// when all agree with the reference, else the first verdict that did not.
// pre, when not nil, is the round's first run, made beside the last
// round's diagnosis (nextFirstJoint). What runs beside the first
// (jointFirst) is kept when the round calls for it (jointRound.settled).
func (v *verification) joint(ctx context.Context, js jointSpec, pre *exercise.Result) (jointRound, error) {
	r := jointRound{round: js.round}
	prefix, err := v.jointPolicy(js.p, js.round)
	if err != nil {
		return r, err
	}
	n := v.o.opts.JointRuns
	differs := func(res *exercise.Result) bool { return !res.Verdict.Same(v.ref.Verdict) }
	ph := phase{kind: "joint", prefix: prefix, n: n,
		name:   func(i int) string { return fmt.Sprintf("joint run %d/%d (round %d)", i+1, n, js.round) },
		enough: func(done []*exercise.Result) bool { return differs(done[len(done)-1]) }}
	done, err := v.jointFirst(ctx, &r, js, ph, pre)
	if err != nil {
		return r, err
	}
	// A job kept beside the round (the containment checks, or the
	// diagnosis, whose differing run ends the phase before another run)
	// uses the working directory as it is: the other runs go to lanes.
	ph.workDirBusy = r.job != nil && r.job.kept
	results, err := v.runPhase(ctx, ph, done)
	if err != nil {
		if r.job != nil {
			r.job.stop()
		}
		return r, err
	}
	for _, res := range results {
		if differs(res) {
			r.diff = res
			break
		}
	}
	r.settled()
	return r, nil
}

// jointPolicy writes round's policy p, with the limits the exercise runs
// get, and returns the enforcer's command for it.
func (v *verification) jointPolicy(p *policy.Policy, round int) ([]string, error) {
	path := filepath.Join(v.o.scratch, fmt.Sprintf("%s.joint.%d.cfg", v.ex.Stem(), round))
	if err := os.WriteFile(path, v.timed(p).Render(), 0o644); err != nil {
		return nil, err
	}
	return enforcer.Command(enforcer.Prefix(v.o.runExe, false), path), nil
}

// jointFirst is the round's first joint run, accounted, and what runs
// beside it, or nothing when the phase is to make it alone. With pre (the
// first run, made already) that agrees, the containment checks the round
// is foretold to settle for run beside its other runs. Otherwise the
// foretold job runs beside the first run (besideFirstJoint), and when that
// is the diagnosis and the run called for it, the next round's first run
// follows in the lane, still beside the diagnosis (nextFirstJoint).
func (v *verification) jointFirst(ctx context.Context, r *jointRound, js jointSpec, ph phase, pre *exercise.Result) ([]*exercise.Result, error) {
	if pre != nil {
		if err := v.account("joint", true, pre); err != nil {
			return nil, err
		}
		if n := v.o.opts.JointRuns; n > 1 && pre.Verdict.Same(v.ref.Verdict) && !v.foretellsRow(js.p) && v.restSideBySide(pre) {
			r.job = v.containBeside(js, r)
			r.job.kept = true
			v.o.progress("%s: containment checks, beside joint runs 2 to %d (round %d)", v.ex.Name, n, js.round)
			r.job.start(ctx, v.o.steps)
		}
		return []*exercise.Result{pre}, nil
	}
	job := v.besideFirstJoint(js, r)
	if job == nil {
		return nil, nil
	}
	first, cpus, err := v.firstJointBeside(ctx, ph.prefix, ph.name(0), job)
	if err != nil || first == nil {
		return nil, err
	}
	r.job = job
	if job.kept && r.diagnosis != nil {
		r.next = v.nextFirstJoint(ctx, js.p, js.round+1, cpus)
	}
	return []*exercise.Result{first}, nil
}

// nextFirst is the next round's first joint run, made beside this round's
// diagnosis under the policy the cross-check foretells for that round.
type nextFirst struct {
	policy *policy.Policy
	res    *exercise.Result
}

// nextFirstJoint makes round's first joint run in a lane on cpus while the
// last round's diagnosis runs, under p with a rule for each UDP port the
// cross-check foretells (the rows the diagnosis should find); nil when it
// could not be made. It is not accounted: nextFor keeps it only when the
// diagnosis found exactly those rows.
func (v *verification) nextFirstJoint(ctx context.Context, p *policy.Policy, round int, cpus []int) *nextFirst {
	next := policy.WithBind(p, v.foretold)
	prefix, err := v.jointPolicy(next, round)
	if err != nil {
		v.o.log.Warn("observe: the next round's policy", "err", err)
		return nil
	}
	name := fmt.Sprintf("joint run 1/%d (round %d)", v.o.opts.JointRuns, round)
	v.o.progress("%s: %s, beside the diagnosis, under the rows the cross-check foretells", v.ex.Name, name)
	v.o.steps.Note(nextStep(round), schedule.Started)
	results, err := v.laneRuns(ctx, prefix, 0, 1, 1, func(int) string { return name }, cpus)
	if err != nil {
		v.o.log.Warn("observe: the next round's first joint run", "err", err)
		return nil
	}
	return &nextFirst{policy: next, res: results[0]}
}

// nextFor is round's first joint run made beside the last round's
// diagnosis (jointRound.next), when it ran under p, the policy the
// diagnosis settled on; else nil, and round makes its first run itself.
func (v *verification) nextFor(r *jointRound, p *policy.Policy, round int) *exercise.Result {
	if r.next == nil {
		return nil
	}
	if !bytes.Equal(v.timed(r.next.policy).Render(), v.timed(p).Render()) {
		v.o.progress("%s: joint run 1/%d (round %d) discarded: the diagnosis found other rows than the cross-check foretold", v.ex.Name, v.o.opts.JointRuns, round)
		v.o.steps.Note(nextStep(round), schedule.Discarded)
		return nil
	}
	v.o.steps.Note(nextStep(round), schedule.Kept)
	return r.next.res
}

// nextStep names round's first joint run, made beside the last round's
// diagnosis, in the schedule's event log.
func nextStep(round int) string {
	return fmt.Sprintf("joint run 1 (round %d), beside the diagnosis", round)
}

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
	// step names the job in the schedule's event log.
	step string
	// pins is set for a traced run, which keeps this process on one CPU
	// (pinOneCPU): the lane then gets the other CPUs.
	pins bool
	// wanted says whether the round's first joint run calls for the job.
	wanted func(first *exercise.Result) bool
	run    func(ctx context.Context)
	// kept is set when the first joint run wanted the job.
	kept bool
	task *schedule.Task[struct{}]
}

// start runs the job beside the caller, as a step of the schedule logged
// in steps.
func (j *besideJob) start(ctx context.Context, steps *schedule.Log) {
	j.task = schedule.Go(ctx, steps, j.step, func(ctx context.Context) (struct{}, error) {
		j.run(ctx)
		return struct{}{}, nil
	})
}

// wait waits for the job to end; what it did is kept.
func (j *besideJob) wait() { _, _ = j.task.Keep() }

// stop ends the job and waits for it; nothing it did is kept.
func (j *besideJob) stop() { j.task.Discard() }

// foretold are the UDP ports the cross-check's run was refused a bind to,
// by strace's attribution and a net.bind_udp record alike: a joint run
// under a policy without a rule for one of them will be refused the same
// bind and differ from the reference.
func foretold(ob *engine.Observed) []int {
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
// nil when it foretells a difference in the last round (which aborts), the
// guest has no lane to spare or too little memory for one more run, or, for
// the containment, the round's other runs would not run in lanes
// (restSideBySide).
func (v *verification) besideFirstJoint(js jointSpec, r *jointRound) *besideJob {
	if v.o.opts.Lanes < 2 || v.ref == nil {
		return nil
	}
	if !v.foretellsRow(js.p) {
		if !v.restSideBySide(v.ref) {
			return nil
		}
		return v.containBeside(js, r)
	}
	if js.round == v.o.opts.Rounds {
		return nil
	}
	return v.diagnosisBeside(js.p, r)
}

// restSideBySide says whether a round's runs after the first will run side
// by side in lanes, judged by a run of the exercise (lanes): a containment
// beside them needs the working directory, which a run one after another
// would empty for its fresh copy. A round of one run has no rest.
func (v *verification) restSideBySide(run *exercise.Result) bool {
	n := v.o.opts.JointRuns
	return n == 1 || v.lanes(n-1, []*exercise.Result{run}) > 1
}

// diagnosisBeside is the diagnosis run under p as a job: wanted when the
// first joint run differs from the reference and did not run out of time
// (stoppedJoint's observed run follows one that did). Its run is counted
// when it is taken (jointRound.takeDiagnosis).
func (v *verification) diagnosisBeside(p *policy.Policy, r *jointRound) *besideJob {
	d := &besideDiagnosis{}
	r.diagnosis = d
	timed, nth := v.timed(p), v.es.Runs["diagnosis"]+1
	return &besideJob{what: "diagnosis run (strace + audit)", step: fmt.Sprintf("diagnosis (round %d)", r.round), pins: v.o.opts.OneCPU,
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
	ob  *engine.Observed
	res *exercise.Result
	err error
}

// containBeside is the containment checks under p as a job: wanted when
// the first joint run agrees with the reference; kept when the whole round
// settles (jointRound.contained).
func (v *verification) containBeside(js jointSpec, r *jointRound) *besideJob {
	c := &containment{}
	r.contained = c
	return &besideJob{what: "containment checks", step: fmt.Sprintf("containment checks (round %d)", r.round),
		wanted: func(first *exercise.Result) bool { return first.Verdict.Same(v.ref.Verdict) },
		run:    func(ctx context.Context) { *c = v.containUncounted(ctx, js.p, js.asRead, js.early) }}
}

// firstJointBeside makes the round's first joint run behind prefix in a
// lane while job runs in the working directory, accounts for the run and
// returns the CPUs the lane ran on (nil: all).
// The job is stopped when the run does not want it, else left running:
// the caller waits for it. Without a lane to spare it returns nil, and the
// phase runs as it would without a job.
func (v *verification) firstJointBeside(ctx context.Context, prefix []string, name string, job *besideJob) (*exercise.Result, []int, error) {
	lanes, cpus := v.besideLanes(1, v.ref)
	if lanes == 0 {
		return nil, nil, nil
	}
	if !job.pins {
		cpus = nil
	}
	v.o.progress("%s: %s, beside %s", v.ex.Name, job.what, name)
	job.start(ctx, v.o.steps)
	results, err := v.laneRuns(ctx, prefix, 0, 1, 1, func(int) string { return name }, cpus)
	if err == nil {
		err = v.account("joint", true, results[0])
	}
	if err != nil {
		job.stop()
		return nil, nil, err
	}
	if job.kept = job.wanted(results[0]); !job.kept {
		job.stop()
		v.o.progress("%s: %s discarded: %s did not call for it", v.ex.Name, job.what, name)
	}
	return results[0], cpus, nil
}

// jointRound is one round of joint runs: the first that differs from the
// reference (nil when all agree), and what ran beside its first run.
type jointRound struct {
	round     int
	diff      *exercise.Result
	job       *besideJob
	diagnosis *besideDiagnosis
	contained *containment
	next      *nextFirst
}

// settled ends the round: it keeps the outcome of the job beside it only
// when the round called for it (a containment when all runs agreed, a
// diagnosis when the first differed), waiting for the job to end, and
// stops a job still running that the round did not call for (a
// containment beside a round whose later run differed).
func (r *jointRound) settled() {
	if r.diff != nil {
		r.contained = nil
	} else {
		r.diagnosis, r.next = nil, nil
	}
	switch {
	case r.job == nil || !r.job.kept:
		r.diagnosis, r.contained, r.next = nil, nil, nil
	case r.diagnosis == nil && r.contained == nil:
		r.job.stop()
	default:
		r.job.wait()
	}
}

// takeDiagnosis is the round's diagnosis: the one made beside the first
// joint run, counted now, or one made now.
func (v *verification) takeDiagnosis(ctx context.Context, r *jointRound, p *policy.Policy) (*engine.Observed, error) {
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
