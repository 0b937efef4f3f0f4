package observer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWarmUpHostKernel: with a lane to spare the warm-up runs the key's
// first exercise in lane 1's copy, never in the working directory, and
// stop ends it; stopped at once, it returns at once; without a lane to
// spare it runs nothing.
func TestWarmUpHostKernel(t *testing.T) {
	v, _ := hostVerification(t, 0, nil)
	o := v.o
	var progress lockedBuffer
	o.opts.Exercises, o.opts.Lanes, o.opts.Progress = "../testdata/exercises", 2, &progress
	report := filepath.Join(o.scratch, "lanes", "1", filepath.Base(o.work), "test-reports", "fixture.xml")
	os.RemoveAll(filepath.Join(o.work, "test-reports"))

	stop := o.warmUp(t.Context())
	deadline := time.Now().Add(2 * time.Minute)
	for _, err := os.Stat(report); err != nil && time.Now().Before(deadline); _, err = os.Stat(report) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if _, err := os.Stat(report); err != nil {
		t.Fatalf("the warm-up left no report in lane 1's copy: %v\n%s", err, progress.Bytes())
	}
	if _, err := os.Stat(filepath.Join(o.work, "test-reports")); !os.IsNotExist(err) {
		t.Errorf("the warm-up ran in the working directory: %v", err)
	}
	if !strings.Contains(string(progress.Bytes()), "udp-fixture: a warm-up run in a lane beside the kernel proof (not counted)\n") {
		t.Errorf("progress: %s", progress.Bytes())
	}

	start := time.Now()
	o.warmUp(t.Context())()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a warm-up stopped at once took %v to stop", took)
	}

	os.RemoveAll(filepath.Join(o.scratch, "lanes"))
	o.opts.Lanes = 1
	o.warmUp(t.Context())()
	if _, err := os.Stat(filepath.Join(o.scratch, "lanes")); !os.IsNotExist(err) {
		t.Errorf("with one lane the warm-up ran: %v", err)
	}
}
