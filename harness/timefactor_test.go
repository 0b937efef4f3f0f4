package harness

import "testing"

// TestTimeFactor: the runs' time limits are scaled only in a guest under
// TCG (by the flag's factor, the default when unset); under KVM and on the
// host (no accelerator) never.
func TestTimeFactor(t *testing.T) {
	for _, tc := range []struct {
		accel string
		flag  int
		want  int
	}{{AccelTCG, 0, DefaultTCGTimeFactor}, {AccelTCG, 4, 4}, {AccelTCG, 1, 1},
		{AccelKVM, 4, 1}, {AccelKVM, 0, 1}, {"", 4, 1}} {
		if got := TimeFactor(tc.accel, tc.flag); got != tc.want {
			t.Errorf("TimeFactor(%q, %d) = %d, want %d", tc.accel, tc.flag, got, tc.want)
		}
	}
}
