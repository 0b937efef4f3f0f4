package engine

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
	// Factor is the time factor Limit was scaled by (TimeFactor); 0 or 1
	// is none.
	Factor int
	// Log is the tail of the run's log.
	Log string
}

func (e *TimeoutError) Error() string {
	bound := "the policy's timeout"
	if e.Factor > 1 {
		bound = fmt.Sprintf("the policy's timeout ×%d, the time factor under TCG", e.Factor)
	}
	return fmt.Sprintf("inconclusive: the %s run ran out of time (%s, %s); a time-out is no difference between the kernels", e.Kind, e.Limit, bound)
}

// Evidence is what the record keeps of the stopped run.
func (e *TimeoutError) Evidence() map[string]any {
	return map[string]any{"run": e.Kind, "limit_seconds": e.Limit.Seconds(), "time_factor": max(e.Factor, 1), "log_tail": e.Log}
}

// FactorNote is "time limits ×N under TCG" for a factor above 1, else "":
// what progress and verdict lines add when the runs' limits were scaled.
func FactorNote(factor int) string {
	if factor <= 1 {
		return ""
	}
	return fmt.Sprintf("time limits ×%d under TCG", factor)
}

// Slowed is p with its timeout and cpu limits multiplied by factor (at
// most policy.MaxSeconds): the limits of an exercise run in a guest that
// runs factor times slower. p itself when factor is 1 or less; p is never
// changed. The containment checks take p's own limits: whether a limit
// holds does not depend on the speed.
func Slowed(p *policy.Policy, factor int) *policy.Policy {
	if factor <= 1 {
		return p
	}
	q := p.Clone()
	for k, unit := range map[policy.LimitKey]int64{policy.Timeout: 1000, policy.CPU: 1} {
		l, ok := q.Limits[k]
		if !ok || l.Off {
			continue
		}
		if most := policy.MaxSeconds * unit; l.Value > most/int64(factor) {
			l.Value = most
		} else {
			l.Value *= int64(factor)
		}
		q.Limits[k] = l
	}
	return q
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
