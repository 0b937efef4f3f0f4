package enforcer

import (
	"errors"
	"io"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// TestTimeoutOverflowRefused holds a policy built in code to the parser's
// range: a timeout whose nanoseconds pass int64 is refused before anything
// runs, not wrapped (18446744074 s was a 290 ms limit, 9223372037 s none).
func TestTimeoutOverflowRefused(t *testing.T) {
	needHostLandlock(t)
	for _, seconds := range []int64{18446744074, 9223372037} {
		p := mustParse(t, baseRules)
		p.Limits[policy.Timeout] = policy.Limit{Value: seconds * 1000}
		status, err := Run(t.Context(), Options{Policy: p, Command: []string{"/usr/bin/true"}, Stderr: io.Discard})
		if status != StatusRefused || !errors.Is(err, ErrRefused) {
			t.Errorf("timeout=%d: Run = %d, %v; want 125 and nothing run", seconds, status, err)
		}
	}
}
