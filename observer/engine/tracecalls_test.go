package engine

import (
	"slices"
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
)

// TestTracedCallsCoverRecords checks that an observed run traces every call
// the attribution reads and every call a denial record's SYSCALL record can
// name, so no refusal a record stands for is left out of the trace.
func TestTracedCallsCoverRecords(t *testing.T) {
	calls := TracedCalls()
	t.Logf("%d calls: %v", len(calls), calls)
	for _, c := range attribute.TraceCalls() {
		if !slices.Contains(calls, c) {
			t.Errorf("TracedCalls lacks %s, which attribution reads", c)
		}
	}
	for nr, c := range syscallsX8664 {
		if !slices.Contains(calls, c) {
			t.Errorf("TracedCalls lacks %s (x86_64 %d), which a record can name", c, nr)
		}
	}
	for _, c := range []string{"read", "close", "newfstatat", "futex", "lseek"} {
		if slices.Contains(calls, c) {
			t.Errorf("TracedCalls holds %s, which neither Landlock nor the attribution needs", c)
		}
	}
}
