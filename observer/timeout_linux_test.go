//go:build linux

package observer

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
)

// TestJointTimeoutHostKernel: a joint run that runs out of time leaves the
// exercise inconclusive (never failed) after about the policy's timeout,
// its record keeps the tail of the stopped run's log, and the trace kept is
// that of one observed run of the same policy, which shows where it
// stopped.
func TestJointTimeoutHostKernel(t *testing.T) {
	needRootAudit(t)
	col, err := audit.Start(audit.Options{})
	if err != nil {
		t.Fatalf("audit.Start: %v", err)
	}
	defer col.Close()
	found, err := exercise.ForKey("testdata/exercises", "observer")
	i := slices.IndexFunc(found, func(f exercise.Found) bool { return f.Name == "nofile-hang" })
	if err != nil || i < 0 {
		t.Fatalf("ForKey(observer) = %v, %v; want nofile-hang among them", found, err)
	}
	o := &observer{opts: GuestOptions{Key: "observer", PathSets: observerPathSet, ReferenceRuns: 1, JointRuns: 2, Rounds: 3},
		exe: lockstepBinary(t), work: exercise.DefaultWorkDir, scratch: t.TempDir(), wait: DefaultWait, col: col, abi: 10,
		log: slog.New(slog.DiscardHandler)}
	o.opts.Progress = testWriter{t}
	t0 := time.Now()
	k, _, trace, es := o.verify(t.Context(), found[i])
	took := time.Since(t0)
	t.Logf("%s; runs %v; %.1f s", es.Reason, es.Runs, took.Seconds())
	if es.Verified || !es.Inconclusive || !strings.Contains(es.Reason, "joint run ran out of time (30s") {
		t.Errorf("verified %v, inconclusive %v, reason %q; want inconclusive, the joint run out of time", es.Verified, es.Inconclusive, es.Reason)
	}
	if got := exercisesStatus(false, es.Inconclusive); got != StatusIndeterminate {
		t.Errorf("status %d, want %d", got, StatusIndeterminate)
	}
	if tail, _ := k.Evidence["log_tail"].(string); !strings.Contains(tail, "could not open file descriptor") {
		t.Errorf("evidence %v does not keep the stopped run's log", k.Evidence)
	}
	if es.Trace == nil || es.Trace.Run != "observed" || es.Runs["observed"] != 1 || es.Runs["joint"] != 1 {
		t.Errorf("trace %+v, runs %v; want the trace of one observed re-run after one joint run", es.Trace, es.Runs)
	}
	if !strings.Contains(string(trace), "could not open file descriptor") {
		t.Error("the kept trace does not show where the run stopped")
	}
	// reference and cross-check end at once; the joint run and its
	// observed re-run take 30 s each.
	if took > 150*time.Second {
		t.Errorf("took %s; the policy's timeout is 30 s a run", took)
	}
}

// TestRunBound: the policy's timeout bounds every run; an explicit bound
// only lowers it.
func TestRunBound(t *testing.T) {
	p, err := policy.Parse("p", []byte("[limits]\ntimeout=4\n"))
	if err != nil {
		t.Fatal(err)
	}
	none := policy.Union()
	for _, tc := range []struct {
		p        *policy.Policy
		explicit time.Duration
		want     time.Duration
	}{{p, 0, 4 * time.Second}, {p, time.Second, time.Second}, {p, time.Minute, 4 * time.Second}, {none, 0, 0}, {none, time.Minute, time.Minute}} {
		if got := RunBound(tc.p, tc.explicit); got != tc.want {
			t.Errorf("RunBound(%v, %s) = %s, want %s", tc.p.Limits, tc.explicit, got, tc.want)
		}
	}
	var te *TimeoutError
	if !errors.As(error(&TimeoutError{Kind: "joint"}), &te) {
		t.Fatal("TimeoutError is not an error")
	}
}
