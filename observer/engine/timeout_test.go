package engine

import (
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// TestSlowedBound: with a factor (a guest under TCG) the run bound and the
// policy the runs get have the timeout and cpu limits times the factor, and
// nothing else changes; the policy itself, which the containment checks
// take, keeps its own limits; with none (KVM) the runs get the policy as it
// is.
func TestSlowedBound(t *testing.T) {
	p, err := policy.Parse("p", []byte("[read]\n/usr\n\n[limits]\ntimeout=60\ncpu=30\nnproc=64\nmem_mb=0\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]map[policy.LimitKey]policy.Limit{
		10: {policy.Timeout: {Value: 600_000}, policy.CPU: {Value: 300}, policy.NProc: {Value: 64}, policy.MemMB: {Off: true}},
		1:  {policy.Timeout: {Value: 60_000}, policy.CPU: {Value: 30}, policy.NProc: {Value: 64}, policy.MemMB: {Off: true}},
	}
	bound := map[int]time.Duration{10: 10 * time.Minute, 1: time.Minute}
	for factor, limits := range want {
		runs := Slowed(p, factor)
		for k, l := range limits {
			if runs.Limits[k] != l {
				t.Errorf("factor %d: the runs' %s = %+v, want %+v", factor, k, runs.Limits[k], l)
			}
		}
		if got := RunBound(runs, 0); got != bound[factor] {
			t.Errorf("factor %d: RunBound = %s, want %s", factor, got, bound[factor])
		}
		if !runs.Equal(p) && factor == 1 || len(runs.FS) != len(p.FS) {
			t.Errorf("factor %d: the runs' policy differs beyond its limits: %s", factor, runs.Render())
		}
	}
	// The policy the containment checks take is untouched.
	if p.Limits[policy.Timeout].Value != 60_000 || p.Limits[policy.CPU].Value != 30 {
		t.Errorf("Slowed changed the policy itself: %+v", p.Limits)
	}
	huge, err := policy.Parse("h", []byte("[limits]\ntimeout=999999999\ncpu=999999999\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := Slowed(huge, 100).Limits
	if got[policy.Timeout].Value != policy.MaxSeconds*1000 || got[policy.CPU].Value != policy.MaxSeconds {
		t.Errorf("Slowed past the largest limit = %+v, want capped at %d s", got, int64(policy.MaxSeconds))
	}
}

// TestTimeoutErrorFactor: a run out of time under a scaled bound says so,
// and its evidence keeps the factor.
func TestTimeoutErrorFactor(t *testing.T) {
	e := &TimeoutError{Kind: "reference", Limit: 10 * time.Minute, Factor: 10}
	if got, want := e.Error(), "inconclusive: the reference run ran out of time (10m0s, the policy's timeout ×10, the time factor under TCG); a time-out is no difference between the kernels"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if f := e.Evidence()["time_factor"]; f != 10 {
		t.Errorf("evidence time_factor = %v, want 10", f)
	}
	if f := (&TimeoutError{Kind: "joint", Limit: time.Minute}).Evidence()["time_factor"]; f != 1 {
		t.Errorf("evidence time_factor without a factor = %v, want 1", f)
	}
}
