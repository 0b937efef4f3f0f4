package observer

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/record"
)

// observe runs the exercise under p with strace and the log-new-exec flag
// through the engine (engine.Run), collecting the run's records; records
// that cannot be trusted as complete abort (JudgeAudit).
func (v *verification) observe(ctx context.Context, kind string, p *policy.Policy) (*engine.Observed, error) {
	return v.observeRun(ctx, kind, v.es.Runs[kind]+1, p, func(ctx context.Context, prefix []string) (*exercise.Result, error) {
		return v.exRun(ctx, kind, prefix)
	})
}

// observeRun is observe with the run's number among its kind (in its
// scratch files' names) and what runs the exercise behind the prefix:
// exRun, or a run accounted for later.
func (v *verification) observeRun(ctx context.Context, kind string, nth int, p *policy.Policy,
	run func(ctx context.Context, prefix []string) (*exercise.Result, error)) (*engine.Observed, error) {
	o := v.o
	if o.opts.OneCPU {
		restore, err := pinOneCPU()
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := restore(); err != nil {
				o.log.Warn("observe: the CPUs after a traced run", "err", err)
			}
		}()
	}
	ob, err := engine.Run(ctx, engine.Spec{Policy: p, Exe: o.runExe, Scratch: o.scratch, Stem: fmt.Sprintf("%s.%s.%d", v.ex.Stem(), kind, nth),
		Kind: kind, LogSubprocesses: true, Collector: o.col, Wait: o.wait,
		Control: control.Options{PseudoTerminals: v.ex.Config.UsesPseudoTerminals, NoCreate: true},
		Run: func(ctx context.Context, prefix []string) (int, string, error) {
			res, err := run(ctx, prefix)
			if err != nil {
				return 0, "", err
			}
			return res.Status, "", nil
		}})
	if err != nil {
		return ob, err
	}
	if ae := engine.JudgeAudit(kind, ob.Audit); ae != nil {
		return ob, ae
	}
	return ob, nil
}

// crossCheck runs the narrowed policy observed and joins the two views.
func (v *verification) crossCheck(ctx context.Context, p *policy.Policy) (string, error) {
	ob, removed, err := v.crossCheckRun(ctx, p, &v.stopped)
	return v.crossCheckJudge(ob, removed, err)
}

// crossCheckRun makes the cross-check's run: the policy narrowed, observed.
// It returns the observation, how many grants the narrowing removed, and
// the run's error; crossCheckJudge takes them. A time-out of the run is
// noted in *stopped (account), when that is nil.
func (v *verification) crossCheckRun(ctx context.Context, p *policy.Policy, stopped **engine.TimeoutError) (*engine.Observed, int, error) {
	// The exercise contract starts /bin/bash: what it needs to start is
	// never taken away (else the run stops before the command starts).
	needed, err := StartNeeds(exercise.Interpreter)
	if err != nil {
		v.o.log.Warn("cross-check: what the interpreter needs to start is unknown; narrowing every second grant, whatever it holds", "err", err)
	}
	narrowed, removed := policy.Narrowed(p, needed...)
	// The policy's own timeout bounds this run too, enforced by lockstep
	// run so that strace ends cleanly and its trace shows where it stopped.
	if l, ok := v.timed(p).Limits[policy.Timeout]; ok {
		narrowed.Limits[policy.Timeout] = l
	}
	v.o.progress("%s: cross-check run (%d of %d filesystem grants removed, strace + audit)", v.ex.Name, removed, len(p.FS))
	const kind = "cross-check"
	ob, err := v.observeRun(ctx, kind, v.es.Runs[kind]+1, narrowed, func(ctx context.Context, prefix []string) (*exercise.Result, error) {
		res, err := v.ex.Run(ctx, v.runOptions(prefix))
		if err != nil {
			return nil, err
		}
		return res, v.accountTo(stopped, kind, true, res)
	})
	return ob, removed, err
}

// crossCheckJudge records the cross-check's join and says why it fails
// the exercise, if it does.
func (v *verification) crossCheckJudge(ob *engine.Observed, removed int, err error) (string, error) {
	if err != nil {
		return "", v.stoppedOr(ob, "cross-check", err)
	}
	v.keepTrace("cross-check", ob.Trace)
	v.foretold = foretold(ob)
	cmp := ob.Join
	v.k.CrossCheck = cmp.Record()
	v.k.Mismatches, v.k.AuditOnly = cmp.Mismatches, cmp.AuditOnly
	v.es.Matched = matchedPairs(ob)
	v.o.progress("%s: cross-check: %d strace refusal(s), %d record(s), %d mismatch(es), %d audit-only",
		v.ex.Name, cmp.Compared, cmp.Records, len(cmp.Mismatches), len(cmp.AuditOnly))
	switch {
	case len(cmp.Mismatches) > 0:
		return fmt.Sprintf("the audit cross-check found %d strace denial(s) the kernel's records do not agree with", len(cmp.Mismatches)), nil
	case v.stopped != nil:
		return "", v.stopped
	case cmp.Compared == 0 && removed > 0:
		return fmt.Sprintf("the cross-check run was refused nothing strace could attribute, although it ran without %d grant(s) the policy holds, so nothing was compared", removed), nil
	}
	return "", nil
}

// keepTrace makes trace the exercise's .abi10.observed.trace.gz.
func (v *verification) keepTrace(run string, trace []byte) {
	v.trace = trace
	v.es.Trace = &TraceInfo{Run: run, SHA256: record.SHA256Hex(trace), Bytes: len(trace)}
}

// stoppedOr is the error of an observed run that failed: when the run ran
// out of time, the time-out (its trace kept, if it was read), else err.
func (v *verification) stoppedOr(ob *engine.Observed, run string, err error) error {
	if v.stopped == nil {
		return err
	}
	if ob != nil && ob.Trace != nil {
		v.keepTrace(run, ob.Trace)
	}
	return v.stopped
}

// stoppedJoint follows a joint run that ran out of time with one observed
// run of the same policy (strace + audit, the same bound), whose trace is
// kept, so that it shows where the run stopped; the exercise is
// inconclusive either way.
func (v *verification) stoppedJoint(ctx context.Context, p *policy.Policy) error {
	stopped := v.stopped
	v.o.progress("%s: the %s run ran out of time (%s); one observed run of the same policy shows where", v.ex.Name, stopped.Kind, stopped.Limit)
	ob, err := v.observe(ctx, "observed", v.timed(p))
	if err != nil {
		v.o.log.Warn("the observed re-run of a stopped joint run", "err", err)
	}
	if ob != nil && ob.Trace != nil {
		v.keepTrace("observed", ob.Trace)
	}
	return stopped
}

// difference sorts a diagnosis run's confirmed refusals into network rules
// and everything else.
func difference(ob *engine.Observed) Difference {
	var d Difference
	for _, r := range ob.Landlock {
		switch r.Layer {
		case attribute.Network:
			for _, n := range r.Net {
				if n.Section == policy.Bind {
					d.Bind = append(d.Bind, bindRule(n.Port, n.Transport))
				} else {
					d.Connect = append(d.Connect, fmt.Sprintf("allow %s:%d %s", n.Addr, n.Port, n.Transport))
				}
			}
		default:
			d.Other = append(d.Other, r.String())
		}
	}
	for _, r := range ob.Other {
		d.Other = append(d.Other, r.String())
	}
	d.Bind, d.Connect = engine.UniqueSorted(d.Bind), engine.UniqueSorted(d.Connect)
	return d
}

func rawRecords(recs []audit.Record, n int) []string {
	out := []string{}
	for i := range recs {
		if len(out) == n {
			break
		}
		if recs[i].Type == audit.TypeLandlockAccess {
			out = append(out, recs[i].String())
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// matchedPairs are the cross-check's refusals that found their records, in
// trace order, each with them: what the report lists pair by pair.
func matchedPairs(ob *engine.Observed) []engine.Refusal {
	refusals, _, _ := engine.Join(ob, strings.Split(string(ob.Trace), "\n"))
	var out []engine.Refusal
	for _, r := range refusals {
		if len(r.Audit) > 0 {
			out = append(out, r)
		}
	}
	return out
}
