//go:build linux

package observer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
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
		if got := engine.RunBound(tc.p, tc.explicit); got != tc.want {
			t.Errorf("RunBound(%v, %s) = %s, want %s", tc.p.Limits, tc.explicit, got, tc.want)
		}
	}
	var te *engine.TimeoutError
	if !errors.As(error(&engine.TimeoutError{Kind: "joint"}), &te) {
		t.Fatal("TimeoutError is not an error")
	}
}

// TestTimeFactorHostKernel: with a time factor (a guest under TCG) the
// cross-check and joint runs get the policy's timeout times the factor, the
// containment checks the policy's own, and the record says which factor.
func TestTimeFactorHostKernel(t *testing.T) {
	o, ex := observerKeyCase(t, "proc-mounts", 1)
	o.factor = 3
	k, _, _, es := o.verify(t.Context(), ex)
	t.Logf("verified %v (%s); runs %v", es.Verified, es.Reason, es.Runs)
	if k.TimeFactor != 3 {
		t.Errorf("record time_factor = %d, want 3", k.TimeFactor)
	}
	// proc-mounts's policy has timeout=600.
	for _, run := range []string{"cross-check.1", "joint.1"} {
		b, err := os.ReadFile(filepath.Join(o.scratch, "observer_proc-mounts."+run+".cfg"))
		if err != nil || !strings.Contains(string(b), "timeout=1800\n") {
			t.Errorf("the %s run's policy (%v) does not have timeout=1800:\n%s", run, err, b)
		}
	}
	var checked bool
	for _, c := range es.Containment {
		if c.Name == "limit timeout" {
			checked = true
			if !strings.Contains(c.Detail, "600 s") {
				t.Errorf("containment %s: %s; want the policy's own 600 s", c.Name, c.Detail)
			}
		}
	}
	if !checked {
		t.Errorf("no timeout containment check in %+v", es.Containment)
	}
}
