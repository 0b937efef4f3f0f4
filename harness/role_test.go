package harness

import (
	"reflect"
	"slices"
	"testing"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// TestSetRole: the job is the guest's own binary playing the role, with the
// options as JSON, and the caller's environment slice is never written
// through.
func TestSetRole(t *testing.T) {
	env := make([]string, 1, 4)
	env[0] = "A=1"
	o := Options{Env: env}
	if err := o.SetRole("some-guest", struct {
		Key string `json:"key"`
	}{"k"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Command, []string{proto.GuestBinary}) || !slices.Equal(o.Env, []string{"A=1", proto.EnvRole + "=some-guest"}) ||
		string(o.JobOptions) != `{"key":"k"}` {
		t.Errorf("SetRole = command %q, env %q, options %s", o.Command, o.Env, o.JobOptions)
	}
	if env[:2][1] != "" {
		t.Errorf("SetRole wrote into the caller's environment slice: %q", env[:2])
	}
	if err := o.SetRole("bad", func() {}); err == nil {
		t.Error("SetRole took options JSON cannot encode")
	}
}

// TestSizingApply: every sizing field reaches the guest's options, and
// nothing else is touched.
func TestSizingApply(t *testing.T) {
	o := Options{Kernel: "bz", Root: "/old", CPUs: 9}
	Sizing{Root: "/r", Accel: AccelTCG, CPUs: 2, MemMB: 768, Timeout: 3, BootTimeout: 4}.Apply(&o)
	if !reflect.DeepEqual(o, Options{Kernel: "bz", Root: "/r", Accel: AccelTCG, CPUs: 2, MemMB: 768, Timeout: 3, BootTimeout: 4}) {
		t.Errorf("Apply = %+v", o)
	}
}

// TestGuestJobAccel: the job's environment names the accelerator the guest
// was booted with (its timed workloads scale their limits under TCG), after
// the caller's own variables, which are never written through.
func TestGuestJobAccel(t *testing.T) {
	env := make([]string, 1, 4)
	env[0] = "A=1"
	for _, accel := range []string{AccelTCG, AccelKVM} {
		job, _, _ := guestJob(&Options{Env: env, Root: "/"}, "id", accel)
		if want := []string{"A=1", proto.EnvAccel + "=" + accel}; !slices.Equal(job.Env, want) {
			t.Errorf("guestJob(%s).Env = %q, want %q", accel, job.Env, want)
		}
	}
	if env[:2][1] != "" {
		t.Errorf("guestJob wrote into the caller's environment slice: %q", env[:2])
	}
}
