package observer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
)

// besideVerification is hostVerification with two lanes, one CPU kept for
// traced runs, two joint runs a round and the reference made; it skips
// where the fixture's UDP bind is refused (ABI 10: the guest test's case)
// or there is one CPU.
func besideVerification(t *testing.T) (*verification, *policy.Policy, *lockedBuffer) {
	t.Helper()
	v, p := hostVerification(t, 0, nil)
	// On ABI 10 the fixture's UDP bind is refused: the guest test covers it.
	featuretest.RequireWithout(t, featuretest.LandlockUDP)
	if cpus, err := besideCPUs(); err != nil || len(cpus) == 0 {
		t.Skipf("needs 2 CPUs: %v %v", cpus, err)
	}
	progress := &lockedBuffer{}
	v.o.opts.Lanes, v.o.opts.OneCPU, v.o.opts.JointRuns, v.o.opts.Progress = 2, true, 2, progress
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v", err)
	}
	return v, p, progress
}

// wantSteps fails t unless every step in want had an event of kind, in
// that order among the steps that did.
func wantSteps(t *testing.T, log *schedule.Log, kind schedule.Kind, want ...string) {
	t.Helper()
	got := log.Steps(kind)
	i := 0
	for _, s := range got {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("steps %s: %v, want %v among them, in order (events %v)", kind, got, want, log.Events())
	}
}

// wantProgress fails t for each line missing from progress.
func wantProgress(t *testing.T, progress *lockedBuffer, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(string(progress.Bytes()), w) {
			t.Errorf("progress lacks %q:\n%s", w, progress.Bytes())
		}
	}
}

// TestContainBesideJointHostKernel: when the cross-check foretells no
// difference, the containment checks run beside round 1's first joint run
// (which runs in a lane); the round settles, so they are kept, and their
// probes are counted only then, as many as a containment after the runs.
func TestContainBesideJointHostKernel(t *testing.T) {
	v, p, progress := besideVerification(t)
	// Three runs: the two after the first run side by side in lanes, so
	// the working directory stays the containment's.
	v.o.opts.JointRuns = 3
	early := v.startTimeoutCheck(t.Context(), p)
	defer early.Stop()
	final, contained, err := v.abi10(t.Context(), p, early)
	if err != nil || final != p || contained == nil {
		t.Fatalf("abi10 = %v, %v, containment %v; want the policy as read and the containment made beside", final != p, err, contained)
	}
	if v.es.Runs["joint"] != 3 || v.es.Runs["containment probe"] != 0 {
		t.Errorf("runs %v: want 3 joint runs and no probe counted before the containment is kept", v.es.Runs)
	}
	wantSteps(t, v.o.steps, schedule.Kept, "containment checks (round 1)")
	wantProgress(t, progress, "udp-fixture: joint run 1/3 (round 1) (lane 1 of 1)\n", "udp-fixture: joint run 3/3 (round 1) (lane 2 of 2)\n")
	_, failed, err := v.keepContainment(contained)
	if err != nil || len(failed) > 0 {
		t.Fatalf("containment beside the joint run: %v, failed %v", err, failed)
	}
	if got, ops := v.es.Runs["containment probe"], probeOps(t, v, p); got != ops {
		t.Errorf("probe operations counted %d, want %d (those of a containment after the runs)", got, ops)
	}
	if _, cpus, err := allowedCPUs(); err != nil || len(cpus) < 2 {
		t.Errorf("CPUs after the round: %v, %v", cpus, err)
	}
}

// TestDiagnosisBesideJointHostKernel: when the cross-check foretells a
// difference (here a refused UDP bind to 5000 stands in for it) and the
// first joint run does differ (the policy lacks the fixture's data
// directory, so a test fails), the diagnosis that ran beside it is the
// round's: counted once, and its refusals give the abort the diagnosis run
// after the joint run gives (TestABI10AbortHostKernel). Round 2's first run,
// made beside it under the rows foretold, is not counted.
func TestDiagnosisBesideJointHostKernel(t *testing.T) {
	v, p, progress := besideVerification(t)
	v.foretold = []int{5000}
	delete(p.FS, "/var/tmp/testing-dir/data")
	_, _, err := v.abi10(t.Context(), p, nil)
	var ae *engine.AbortError
	if !errors.As(err, &ae) || ae.Reason != "the guest kernel differs from the default prune's in more than a UDP bind port" {
		t.Fatalf("abi10 = %v, want the more-than-a-UDP-bind abort\n%s", err, progress.Bytes())
	}
	if v.es.Runs["diagnosis"] != 1 || v.es.Runs["joint"] != 1 || len(v.k.Rows) != 0 {
		t.Errorf("runs %v, rows %v; want one joint run, one diagnosis run and no row", v.es.Runs, v.k.Rows)
	}
	if o, _ := ae.Evidence["other_refusals"].([]string); !strings.Contains(strings.Join(o, "\n"), "/var/tmp/testing-dir/data") {
		t.Errorf("evidence %v does not name the refused data directory", ae.Evidence)
	}
	// Round 2's first run followed in the lane, under the rows foretold,
	// and is counted nowhere: the diagnosis aborted.
	wantSteps(t, v.o.steps, schedule.Started, "diagnosis (round 1)", nextStep(2))
	wantSteps(t, v.o.steps, schedule.Kept, "diagnosis (round 1)")
	wantProgress(t, progress, "udp-fixture: joint run 1/2 (round 1) (lane 1 of 1)\n")
	if _, cpus, err := allowedCPUs(); err != nil || len(cpus) < 2 {
		t.Errorf("CPUs after the diagnosis: %v, %v", cpus, err)
	}
}

// TestBesideDiscardedHostKernel: a foretelling the first joint run proves
// wrong costs nothing but the job's time. A diagnosis foretold (a refused
// UDP bind stands in) beside a first joint run that agrees is stopped and
// counts no run; a containment foretold beside one that differs is stopped,
// counts no probe, and the diagnosis then runs after the joint run.
func TestBesideDiscardedHostKernel(t *testing.T) {
	t.Run("diagnosis", func(t *testing.T) {
		v, p, _ := besideVerification(t)
		v.foretold = []int{5000}
		final, contained, err := v.abi10(t.Context(), p, nil)
		if err != nil || final != p || contained != nil {
			t.Fatalf("abi10 = changed %v, %v, containment %v; want the policy as read and no containment", final != p, err, contained)
		}
		if v.es.Runs["diagnosis"] != 0 || v.es.Runs["joint"] != 2 || v.stopped != nil || v.trace != nil {
			t.Errorf("runs %v, stopped %v, trace kept %v: want 2 joint runs and nothing of the diagnosis", v.es.Runs, v.stopped, v.trace != nil)
		}
		wantSteps(t, v.o.steps, schedule.Discarded, "diagnosis (round 1)")
		if kept := v.o.steps.Steps(schedule.Kept); len(kept) > 0 {
			t.Errorf("steps kept %v, want none", kept)
		}
		if _, cpus, err := allowedCPUs(); err != nil || len(cpus) < 2 {
			t.Errorf("CPUs after the stopped diagnosis: %v, %v", cpus, err)
		}
	})
	t.Run("containment", func(t *testing.T) {
		v, p, progress := besideVerification(t)
		v.o.opts.JointRuns = 3 // the rest in lanes (restSideBySide)
		delete(p.FS, "/var/tmp/testing-dir/data")
		_, _, err := v.abi10(t.Context(), p, nil)
		var ae *engine.AbortError
		if !errors.As(err, &ae) || ae.Reason != "the guest kernel differs from the default prune's in more than a UDP bind port" {
			t.Fatalf("abi10 = %v, want the more-than-a-UDP-bind abort\n%s", err, progress.Bytes())
		}
		if v.es.Runs["containment probe"] != 0 || v.es.Runs["diagnosis"] != 1 || v.es.Runs["joint"] != 1 {
			t.Errorf("runs %v: want one joint run, one diagnosis run after it and no probe", v.es.Runs)
		}
		wantSteps(t, v.o.steps, schedule.Discarded, "containment checks (round 1)")
		if started := v.o.steps.Steps(schedule.Started); slices.Contains(started, "diagnosis (round 1)") {
			t.Errorf("steps started %v: the diagnosis ran beside the first joint run, want it after", started)
		}
		wantProgress(t, progress, "udp-fixture: ABI-10 round 1: the joint runs differ from the reference; diagnosis run (strace + audit)\n")
	})
}

// TestNextFor: round 2's first joint run, made beside round 1's diagnosis
// under the rows the cross-check foretold, is the round's only when the
// diagnosis settled on the same policy.
func TestNextFor(t *testing.T) {
	p, err := policy.Parse("p.cfg", []byte("[read]\n/usr\n[limits]\ntimeout=60\n"))
	if err != nil {
		t.Fatal(err)
	}
	var progress lockedBuffer
	v := &verification{o: &observer{factor: 10, opts: GuestOptions{JointRuns: 3, Progress: &progress}},
		ex: &exercise.Exercise{Name: "ex"}, foretold: []int{5000}}
	made := &exercise.Result{Status: 0}
	r := &jointRound{next: &nextFirst{policy: policy.WithBind(p, v.foretold), res: made}}
	if got := v.nextFor(r, policy.WithBind(p, []int{5000}), 2); got != made {
		t.Errorf("nextFor(the rows foretold) = %v, want the run made beside the diagnosis", got)
	}
	if got := v.nextFor(r, policy.WithBind(p, []int{5000, 5001}), 2); got != nil {
		t.Errorf("nextFor(other rows) = %v, want nil", got)
	}
	if !strings.Contains(string(progress.Bytes()), "ex: joint run 1/3 (round 2) discarded: the diagnosis found other rows than the cross-check foretold\n") {
		t.Errorf("progress: %s", progress.Bytes())
	}
	if got := v.nextFor(&jointRound{}, p, 2); got != nil {
		t.Errorf("nextFor(nothing made) = %v", got)
	}
}

// TestSettled: a round keeps the containment made beside it only when it
// settles, and stops one the round did not call for instead of waiting it
// out; it keeps a diagnosis (and the next round's first run) only when it
// differs.
func TestSettled(t *testing.T) {
	log := &schedule.Log{}
	start := func(step string, j *besideJob) *besideJob {
		j.step, j.kept = step, true
		j.start(t.Context(), log)
		return j
	}
	ended := make(chan struct{})
	blocking := start("containment beside a round that differs", &besideJob{run: func(ctx context.Context) {
		defer close(ended)
		<-ctx.Done()
	}})
	differs := &exercise.Result{}
	r := &jointRound{job: blocking, contained: &containment{}, diff: differs}
	r.settled()
	select {
	case <-ended:
	default:
		t.Fatalf("a containment beside a round that differs was not stopped")
	}
	if r.contained != nil {
		t.Errorf("a round that differs kept the containment beside it")
	}

	done := start("containment beside a round that settles", &besideJob{run: func(context.Context) {}})
	r = &jointRound{job: done, contained: &containment{probes: 3}}
	if r.settled(); r.contained == nil || r.contained.probes != 3 {
		t.Errorf("a round that settles dropped its containment: %+v", r.contained)
	}

	done = start("diagnosis beside a round that differs", &besideJob{run: func(context.Context) {}})
	r = &jointRound{job: done, diagnosis: &besideDiagnosis{}, next: &nextFirst{}, diff: differs}
	if r.settled(); r.diagnosis == nil || r.next == nil {
		t.Errorf("a round that differs dropped the diagnosis or the next round's first run")
	}
	done = start("diagnosis beside a round that settles", &besideJob{run: func(context.Context) {}})
	r = &jointRound{job: done, diagnosis: &besideDiagnosis{}, next: &nextFirst{}}
	if r.settled(); r.diagnosis != nil || r.next != nil {
		t.Errorf("a round that settles kept a diagnosis or a next round's run")
	}
	stopped := start("job its first run did not call for", &besideJob{run: func(context.Context) {}})
	stopped.kept = false
	stopped.stop()
	r = &jointRound{job: stopped, contained: &containment{}}
	if r.settled(); r.contained != nil {
		t.Errorf("a job its first run did not call for was kept")
	}
	want := []schedule.Event{
		{Step: "containment beside a round that differs", Kind: schedule.Started},
		{Step: "containment beside a round that differs", Kind: schedule.Discarded},
		{Step: "containment beside a round that settles", Kind: schedule.Started},
		{Step: "containment beside a round that settles", Kind: schedule.Kept},
		{Step: "diagnosis beside a round that differs", Kind: schedule.Started},
		{Step: "diagnosis beside a round that differs", Kind: schedule.Kept},
		{Step: "diagnosis beside a round that settles", Kind: schedule.Started},
		{Step: "diagnosis beside a round that settles", Kind: schedule.Discarded},
		{Step: "job its first run did not call for", Kind: schedule.Started},
		{Step: "job its first run did not call for", Kind: schedule.Discarded},
	}
	if got := log.Events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
}

// TestContainNotBesideRunsInTheWorkDirHostKernel: with two joint runs a
// round, the second would run alone in the working directory, whose fresh
// copy empties it under the containment's probes (their policy names the
// exercise's files there: "populating ruleset for
// /var/tmp/testing-dir/build_script.sh …: no such file or directory", once
// in six make stress rounds): the containment does not run beside it.
func TestContainNotBesideRunsInTheWorkDirHostKernel(t *testing.T) {
	v, p, progress := besideVerification(t)
	early := v.startTimeoutCheck(t.Context(), p)
	defer early.Stop()
	final, contained, err := v.abi10(t.Context(), p, early)
	if err != nil || final != p || contained != nil {
		t.Fatalf("abi10 = changed %v, %v, containment %v; want the policy as read and no containment beside", final != p, err, contained)
	}
	// A run in a lane is a step of its own; what must not start is a job
	// beside the joint runs.
	inLane := regexp.MustCompile(` \(lane [0-9]+ of [0-9]+\)$`)
	var beside []string
	for _, s := range v.o.steps.Steps(schedule.Started) {
		if !inLane.MatchString(s) {
			beside = append(beside, s)
		}
	}
	if len(beside) > 0 {
		t.Errorf("steps started beside the joint runs %v, want none: the containment ran beside runs in the working directory\n%s", beside, progress.Bytes())
	}
}

// TestPhaseBesideBusyHostKernel: with the working directory busy, the
// rest of a phase runs in a lane even when there is only one, and leaves
// the working directory as it was.
func TestPhaseBesideBusyHostKernel(t *testing.T) {
	v, _, progress := besideVerification(t)
	mark := filepath.Join(v.o.work, "busy-mark")
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	never := func([]*exercise.Result) bool { return false }
	name := func(i int) string { return fmt.Sprintf("run %d of 2", i+1) }
	results, err := v.runPhase(t.Context(), phase{kind: "reference", n: 2, name: name, enough: never, workDirBusy: true}, []*exercise.Result{v.ref})
	if err != nil || len(results) != 2 {
		t.Fatalf("runPhase = %d results, %v", len(results), err)
	}
	wantProgress(t, progress, "udp-fixture: run 2 of 2 (lane 1 of 1)\n")
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("a run emptied the busy working directory: %v", err)
	}
}

// probeOps is how many probe operations one containment of every check
// under p makes: what an observation counts for its containment.
func probeOps(t *testing.T, v *verification, p *policy.Policy) int {
	t.Helper()
	whole := v.containSetup()
	ops := 0
	whole.Ran = func() { ops++ }
	if _, _, err := contain.Execute(t.Context(), p, whole); err != nil {
		t.Fatal(err)
	}
	return ops
}
