//go:build linux

package observer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// TestJointTimeoutHostKernel: a joint run that runs out of time leaves the
// exercise inconclusive (never failed) after about the policy's timeout,
// its record keeps the tail of the stopped run's log, and the trace kept is
// that of one observed run of the same policy, which shows where it
// stopped.
func TestJointTimeoutHostKernel(t *testing.T) {
	o, ex := observerKeyCase(t, "nofile-hang", 2)
	t0 := time.Now()
	k, _, trace, es := o.verify(t.Context(), ex)
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
