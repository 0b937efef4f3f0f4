package observer

import (
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

// AbortError stops one exercise's verification: Reason becomes the record's
// "aborted", Evidence its "evidence".
type AbortError struct {
	Reason   string
	Evidence map[string]any
}

func (e *AbortError) Error() string { return e.Reason }

func abortf(evidence map[string]any, format string, args ...any) *AbortError {
	if evidence == nil {
		evidence = map[string]any{}
	}
	return &AbortError{Reason: oneLine(fmt.Sprintf(format, args...)), Evidence: evidence}
}

// recordsLost is in the reason of every run whose records cannot be trusted
// as complete.
const recordsLost = "records were lost"

// JudgeAudit returns nil when a run's records can be trusted as complete,
// and otherwise an abort naming the run and every problem: a lost counter
// that moved, a deallocation barrier that did not arrive, a domain whose
// denials=N disagrees with the records received. Such a run is never
// verified.
func JudgeAudit(phase string, rr *audit.RunResult) *AbortError {
	if rr == nil {
		return abortf(nil, "the %s run has no audit result: %s", phase, recordsLost)
	}
	if !rr.Indeterminate() && len(rr.Pending) == 0 && rr.LostAfter == rr.LostBefore {
		return nil
	}
	problems := append([]string{}, rr.Problems...)
	if rr.LostAfter != rr.LostBefore && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf("the kernel's lost counter moved from %d to %d", rr.LostBefore, rr.LostAfter))
	}
	return abortf(map[string]any{"problems": problems, "lost_before": rr.LostBefore, "lost_after": rr.LostAfter},
		"the audit records of the %s run cannot be trusted, %s or a barrier is missing: %s", phase, recordsLost, strings.Join(problems, "; "))
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
