package observer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	var ae *AbortError
	if !errors.As(err, &ae) || ae.Reason != "a defect of the pruner: the reference run stopped before the command started (status 1)" {
		t.Fatalf("reference with broken lanes = %v, want the defect abort", err)
	}
}
