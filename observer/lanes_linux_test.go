package observer

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
	"github.com/lockstep-sandbox/lockstep/record"
)

// TestReferenceLanesHostKernel: with two lanes the first reference run runs
// alone and the other two side by side, each in a lane of its own (its own
// copy of the fixture, which binds 127.0.0.1:5000/udp in each), on this
// machine's kernel; the three agree and are all accounted.
func TestReferenceLanesHostKernel(t *testing.T) {
	v, _ := hostVerification(t, 0, nil)
	var progress lockedBuffer
	v.o.opts.ReferenceRuns, v.o.opts.Lanes, v.o.opts.Progress = 3, 2, &progress
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v\n%s", err, progress.Bytes())
	}
	if v.es.Runs["reference"] != 3 || len(v.es.Reference) != 3 || v.ref == nil {
		t.Errorf("runs %v, %d durations, reference %v; want 3 runs accounted and the first as the reference", v.es.Runs, len(v.es.Reference), v.ref)
	}
	for _, want := range []string{"udp-fixture: reference run 1/3\n", "udp-fixture: reference run 2/3 (lane 1 of 2)\n", "udp-fixture: reference run 3/3 (lane 2 of 2)\n"} {
		if !strings.Contains(string(progress.Bytes()), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.Bytes())
		}
	}
	for _, l := range []string{"1", "2"} {
		report := filepath.Join(v.o.scratch, "lanes", l, filepath.Base(v.o.work), "test-reports", "fixture.xml")
		if _, err := os.Stat(report); err != nil {
			t.Errorf("lane %s's run left no report in its own copy: %v", l, err)
		}
	}
}

// TestLaneFailureHostKernel: a lane that cannot start its run (here the
// program named as lockstep is /bin/false) stops the run before the
// command; the observer takes that as its own defect, never as a flaky
// reference.
func TestLaneFailureHostKernel(t *testing.T) {
	v, _ := hostVerification(t, 0, nil)
	v.o.opts.ReferenceRuns, v.o.opts.Lanes, v.o.exe = 3, 2, "/bin/false"
	err := v.reference(t.Context())
	var ae *engine.AbortError
	if !errors.As(err, &ae) || ae.Reason != "a defect of the pruner: the reference run stopped before the command started (status 1)" {
		t.Fatalf("reference with broken lanes = %v, want the defect abort", err)
	}
}

// TestCrossCheckBesideReferenceHostKernel: with two lanes and one CPU kept
// for traced runs, the first reference run runs alone, then the cross-check
// runs in the working directory while the other two reference runs run one
// after the other in the one lane left, on the other CPUs; all are
// accounted and the cross-check agrees with the audit records as it does
// alone (TestCrossCheckHostKernel).
func TestCrossCheckBesideReferenceHostKernel(t *testing.T) {
	v, p := hostVerification(t, 0, nil)
	if cpus, err := besideCPUs(); err != nil || len(cpus) == 0 {
		t.Skipf("needs 2 CPUs: %v %v", cpus, err)
	}
	var progress lockedBuffer
	v.o.opts.ReferenceRuns, v.o.opts.Lanes, v.o.opts.OneCPU, v.o.opts.Progress = 3, 2, true, &progress
	reason, err := v.referenceAndCrossCheck(t.Context(), p)
	if err != nil || reason != "" {
		t.Fatalf("referenceAndCrossCheck = %q, %v\n%s", reason, err, progress.Bytes())
	}
	if v.es.Runs["reference"] != 3 || v.es.Runs["cross-check"] != 1 || len(v.es.Reference) != 3 || v.ref == nil {
		t.Errorf("runs %v, %d durations, reference %v; want 3 reference runs and a cross-check accounted", v.es.Runs, len(v.es.Reference), v.ref)
	}
	for _, want := range []string{"udp-fixture: reference run 1/3\n", "udp-fixture: reference run 2/3 (lane 1 of 1)\n",
		"udp-fixture: reference run 3/3 (lane 1 of 1)\n", "udp-fixture: cross-check run ("} {
		if !strings.Contains(string(progress.Bytes()), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.Bytes())
		}
	}
	want := []schedule.Event{{Step: "reference runs beside the cross-check", Kind: schedule.Started},
		{Step: LaneStep("reference run 2/3", 1, 1), Kind: schedule.Started}, {Step: LaneStep("reference run 3/3", 1, 1), Kind: schedule.Started},
		{Step: "reference runs beside the cross-check", Kind: schedule.Kept}}
	if got := v.o.steps.Events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if cc := v.k.CrossCheck; cc == nil || cc.StraceDenials == 0 || cc.AuditRecords == 0 || len(cc.Mismatches) != 0 {
		t.Errorf("cross_check = %+v, want refusals and records that agree", cc)
	}
	report := filepath.Join(v.o.scratch, "lanes", "1", filepath.Base(v.o.work), "test-reports", "fixture.xml")
	if _, err := os.Stat(report); err != nil {
		t.Errorf("the lane's runs left no report in its own copy: %v", err)
	}
	// Every thread has its CPUs back.
	if _, cpus, err := allowedCPUs(); err != nil || len(cpus) < 2 {
		t.Errorf("CPUs after the cross-check: %v, %v", cpus, err)
	}
}

// TestCrossCheckBesideBrokenLanesHostKernel: when the lanes beside the
// cross-check cannot start their runs (the program named as lockstep is
// /bin/false, which stops the cross-check's run too), the reference's
// failure is the one reported, as it would be with the runs one after
// another, and the cross-check leaves nothing in the record.
func TestCrossCheckBesideBrokenLanesHostKernel(t *testing.T) {
	v, p := hostVerification(t, 0, nil)
	v.o.opts.ReferenceRuns, v.o.opts.Lanes, v.o.exe = 3, 2, "/bin/false"
	_, err := v.referenceAndCrossCheck(t.Context(), p)
	var ae *engine.AbortError
	if !errors.As(err, &ae) || ae.Reason != "a defect of the pruner: the reference run stopped before the command started (status 1)" {
		t.Fatalf("referenceAndCrossCheck with broken lanes = %v, want the reference's defect abort", err)
	}
	if v.k.CrossCheck != nil || v.trace != nil || v.ref != nil {
		t.Errorf("a discarded cross-check left its join %+v or trace, or a reference was kept", v.k.CrossCheck)
	}
	want := []schedule.Event{{Step: "reference runs beside the cross-check", Kind: schedule.Started},
		{Step: LaneStep("reference run 2/3", 1, 1), Kind: schedule.Started}, {Step: LaneStep("reference run 3/3", 1, 1), Kind: schedule.Started},
		{Step: "cross-check run", Kind: schedule.Cancelled}, {Step: "reference runs beside the cross-check", Kind: schedule.Kept}}
	if got := v.o.steps.Events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events %v, want %v: the lanes' failure cancels the cross-check", got, want)
	}
}

// TestEarlyTimeoutCheckHostKernel: the containment's timeout check started
// before the runs (a 3 s timeout, waited out beside a reference run) lands
// among the other checks, held and counted; when the policy that settled
// is not the one read (a row was added), the early check is dropped and
// the check runs again under the settled policy.
func TestEarlyTimeoutCheckHostKernel(t *testing.T) {
	v, p := hostVerification(t, 0, nil)
	v.o.opts.Lanes = 1
	p.Limits[policy.Timeout] = policy.Limit{Value: 3000}
	early := v.startTimeoutCheck(t.Context(), p)
	defer early.Stop()
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v", err)
	}
	start := time.Now()
	checks, failed, err := v.contain(t.Context(), p, p, early)
	if err != nil || len(failed) != 0 {
		t.Fatalf("contain: %v, failed %v", err, failed)
	}
	held := map[string]bool{}
	for _, c := range checks {
		held[c.Name] = c.Refused && c.Unchecked == ""
	}
	if !held[contain.TimeoutCheck] || !held["canary /root/lockstep-prune-canary"] {
		t.Errorf("checks %+v: want the early timeout check held among the others", checks)
	}
	if !slices.IsSortedFunc(checks, func(a, b record.ContainmentCheck) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("checks not in name order: %+v", checks)
	}
	t.Logf("containment after the early check: %v", time.Since(start).Round(time.Millisecond))
	// The early check's probe operation is counted like the others: as
	// many as one containment of every check at once.
	if got, ops := v.es.Runs["containment probe"], probeOps(t, v, p); got != ops {
		t.Errorf("probe operations counted %d, want %d (those of all checks run at once)", got, ops)
	}

	probes := v.es.Runs["containment probe"]
	again := v.startTimeoutCheck(t.Context(), p)
	// A settled policy other than the one read (on ABI 10 it would hold a
	// UDP row; this kernel may not enforce one, so a copy stands for it).
	settled := p.Clone()
	checks, failed, err = v.contain(t.Context(), settled, p, again)
	if err != nil || len(failed) != 0 {
		t.Fatalf("contain under a settled policy with a row: %v, failed %v: %+v", err, failed, checks)
	}
	if !slices.ContainsFunc(checks, func(c record.ContainmentCheck) bool { return c.Name == contain.TimeoutCheck && c.Refused }) {
		t.Errorf("checks %+v: want the timeout check run again under the settled policy", checks)
	}
	if v.es.Runs["containment probe"] <= probes {
		t.Errorf("probes counted %d then %d", probes, v.es.Runs["containment probe"])
	}
}

// TestEarlyTimeoutCheckOwnCopyHostKernel: the early timeout check's probe
// builds its ruleset from a copy of its own, in a lane, whatever state the
// working directory is in, and leaves that directory alone. While a fresh
// copy empties the working directory, a path the policy names can vanish
// between the enforcer's stat and its open (status 125, "the probe did not
// start under the policy"); here a working directory whose
// build_script.sh, which the fixture's policy names, is a symlink loop
// stands for any state the enforcer cannot build from: a probe started
// there never starts. Without lanes there is no early check: it runs with
// the others, after the runs.
func TestEarlyTimeoutCheckOwnCopyHostKernel(t *testing.T) {
	v, p := hostVerification(t, 0, nil)
	p.Limits[policy.Timeout] = policy.Limit{Value: 2000}
	if err := os.RemoveAll(v.o.work); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(v.o.work, 0o755); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(v.o.work, "build_script.sh")
	if err := os.Symlink("build_script.sh", loop); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(loop) })
	v.o.opts.Lanes = 1
	early := v.startTimeoutCheck(t.Context(), p)
	defer early.Stop()
	s := v.containSetup()
	s.Only = []string{contain.TimeoutCheck}
	checks, failed, err := early.Finish(t.Context(), p, s)
	if err != nil || len(failed) != 0 || len(checks) != 1 || !checks[0].Refused {
		t.Fatalf("the early timeout check beside a working directory it cannot build from: %+v, failed %v, %v", checks, failed, err)
	}
	if left, err := os.ReadDir(v.o.work); err != nil || len(left) != 1 || left[0].Name() != "build_script.sh" {
		t.Errorf("the working directory after the early check: %v, %v; want it as it was", left, err)
	}

	v.o.opts.Lanes = 0
	if e := v.startTimeoutCheck(t.Context(), p); e != nil {
		e.Stop()
		t.Errorf("without lanes the timeout check started early")
	}
}
