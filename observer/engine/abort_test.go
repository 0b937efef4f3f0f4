package engine

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

// TestJudgeAudit: a run whose records were lost, or whose barrier is
// missing, is never trusted; the capture as made is.
func TestJudgeAudit(t *testing.T) {
	_, ok := captured(t, nil)
	if ae := JudgeAudit("cross-check", &audit.RunResult{Result: ok, LostBefore: 3, LostAfter: 3}); ae != nil {
		t.Errorf("complete run judged %v", ae)
	}
	if ae := JudgeAudit("cross-check", &audit.RunResult{Result: ok, LostBefore: 3, LostAfter: 5}); ae == nil || !strings.Contains(ae.Reason, "records were lost") {
		t.Errorf("lost counter moved: %v, want records were lost", ae)
	}
	// The deallocation record never arrived.
	_, pending := captured(t, func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if !strings.Contains(l, "status=deallocated") {
				out = append(out, l)
			}
		}
		return out
	})
	if len(pending.Pending) == 0 {
		t.Fatal("no pending domain without its deallocation record")
	}
	if ae := JudgeAudit("diagnosis", &audit.RunResult{Result: pending}); ae == nil || !strings.Contains(ae.Reason, "records were lost") {
		t.Errorf("missing barrier: %v", ae)
	}
	if ae := JudgeAudit("x", nil); ae == nil {
		t.Error("nil result trusted")
	}
}
