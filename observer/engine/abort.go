package engine

import (
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

// AbortError stops one exercise's verification: Reason becomes the record's
// "aborted", Evidence its "evidence".
type AbortError struct {
	Reason   string
	Evidence map[string]any
}

func (e *AbortError) Error() string { return e.Reason }

// Abortf is an AbortError whose reason is the formatted text and whose
// evidence is evidence.
func Abortf(evidence map[string]any, format string, args ...any) *AbortError {
	if evidence == nil {
		evidence = map[string]any{}
	}
	return &AbortError{Reason: OneLine(fmt.Sprintf(format, args...)), Evidence: evidence}
}

// RecordsLost is in the reason of every run whose records cannot be trusted
// as complete.
const RecordsLost = "records were lost"

// JudgeAudit returns nil when a run's records can be trusted as complete,
// and otherwise an abort naming the run and every problem: a lost counter
// that moved, a deallocation barrier that did not arrive, a domain whose
// denials=N disagrees with the records received. Such a run is never
// verified.
func JudgeAudit(phase string, rr *audit.RunResult) *AbortError {
	if rr == nil {
		return Abortf(nil, "the %s run has no audit result: %s", phase, RecordsLost)
	}
	if !rr.Indeterminate() && len(rr.Pending) == 0 && rr.LostAfter == rr.LostBefore {
		return nil
	}
	problems := append([]string{}, rr.Problems...)
	if rr.LostAfter != rr.LostBefore && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf("the kernel's lost counter moved from %d to %d", rr.LostBefore, rr.LostAfter))
	}
	return Abortf(map[string]any{"problems": problems, "lost_before": rr.LostBefore, "lost_after": rr.LostAfter},
		"the audit records of the %s run cannot be trusted, %s or a barrier is missing: %s", phase, RecordsLost, strings.Join(problems, "; "))
}

// JudgeTrace returns nil when every line of a run's trace was read, and
// otherwise an abort naming the lines that were not: a refusal on such a
// line would go uncompared, its audit record counted audit-only, and the
// run verified without it. (Every trace captured so far parses whole; the
// pruner records the count as trace_errors.)
func JudgeTrace(phase string, errs []*strace.SyntaxError) *AbortError {
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, 0, min(len(errs), 3))
	for _, e := range errs[:min(len(errs), 3)] {
		lines = append(lines, e.Error())
	}
	return Abortf(map[string]any{"unread_lines": len(errs), "first": lines},
		"the trace of the %s run has %d line(s) the parser could not read, so strace's side is incomplete: %s", phase, len(errs), strings.Join(lines, "; "))
}

// OneLine is s on one line: every line break becomes a space.
func OneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
