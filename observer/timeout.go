package observer

import (
	"fmt"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// PrefixGrace is how much longer than the policy's timeout the runner
// waits for a run under lockstep run, whose own timeout ends the command
// first (and lets strace write its trace whole).
const PrefixGrace = 15 * time.Second

// TimeoutError is a run that ran out of time: the exercise is inconclusive,
// not a difference between kernels (unless the cross-check had already found
// a mismatch). Its reason becomes the record's "aborted", Evidence (the run,
// its bound and the tail of its log) the record's "evidence".
type TimeoutError struct {
	// Kind is the run that stopped: reference, cross-check, joint or
	// diagnosis.
	Kind string
	// Limit is the bound it ran into.
	Limit time.Duration
	// Log is the tail of the run's log.
	Log string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("inconclusive: the %s run ran out of time (%s, the policy's timeout); a time-out is no difference between the kernels", e.Kind, e.Limit)
}

// Evidence is what the record keeps of the stopped run.
func (e *TimeoutError) Evidence() map[string]any {
	return map[string]any{"run": e.Kind, "limit_seconds": e.Limit.Seconds(), "log_tail": e.Log}
}

// RunBound is the bound of every run the observer makes of an exercise
// under p: the policy's own timeout limit, as the runs are verified under the
// policy's limits; an explicit bound (GuestOptions.RunTimeout) lowers it, and
// with neither it is 0 (the exercise package's default).
func RunBound(p *policy.Policy, explicit time.Duration) time.Duration {
	l, ok := p.Limits[policy.Timeout]
	if !ok {
		return explicit
	}
	d, err := l.Duration(policy.Timeout)
	if err != nil || d == 0 {
		return explicit
	}
	if explicit != 0 && explicit < d {
		return explicit
	}
	return d
}
