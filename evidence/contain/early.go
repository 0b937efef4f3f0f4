package contain

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/record"
)

// Early is a part of the containment checks started ahead of the rest,
// beside other work: the timeout check (TimeoutCheck) only sleeps until the
// policy's timeout ends its probe, up to the probe's cap, so it can wait
// while the exercise's runs run rather than after them.
type Early struct {
	names  []string
	cancel context.CancelFunc
	done   chan struct{}
	checks []record.ContainmentCheck
	failed []string
	err    error
	// ran counts the early probe operations; Finish reports them to its
	// own Setup.Ran, so a caller's counter is never touched from the
	// early checks' goroutine.
	ran atomic.Int64
}

// StartEarly starts the checks called names under p (Execute with s.Only =
// names) and returns at once; s.Ran is not called (Finish reports the
// early probe operations). Finish completes the containment; Stop abandons
// it.
func StartEarly(ctx context.Context, p *policy.Policy, s Setup, names ...string) *Early {
	ctx, cancel := context.WithCancel(ctx)
	e := &Early{names: names, cancel: cancel, done: make(chan struct{})}
	s.Only, s.Ran = names, func() { e.ran.Add(1) }
	go func() {
		defer close(e.done)
		e.checks, e.failed, e.err = Execute(ctx, p, s)
	}()
	return e
}

// Finish runs every other check under p (Execute with s.Skip = the early
// names), waits for the early ones and returns all of them in Execute's
// order (by name), the names of those that did not hold after; s.Ran is
// then called once more for each early probe operation. On nil (no early
// checks) it is Execute.
func (e *Early) Finish(ctx context.Context, p *policy.Policy, s Setup) ([]record.ContainmentCheck, []string, error) {
	if e == nil {
		return Execute(ctx, p, s)
	}
	s.Skip = append(slices.Clone(s.Skip), e.names...)
	checks, failed, err := Execute(ctx, p, s)
	if err != nil {
		e.Stop()
		return nil, nil, err
	}
	// A caller that stops waiting (a containment made beside other runs
	// and then not wanted) must not wait out the early checks: the
	// timeout check may sleep for minutes.
	select {
	case <-e.done:
	case <-ctx.Done():
		e.Stop()
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		return nil, nil, e.err
	}
	for range e.ran.Load() {
		if s.Ran != nil {
			s.Ran()
		}
	}
	checks = append(checks, e.checks...)
	slices.SortStableFunc(checks, func(a, b record.ContainmentCheck) int { return strings.Compare(a.Name, b.Name) })
	return checks, append(failed, e.failed...), nil
}

// Stop abandons the early checks: their probes are ended and waited for.
// It does nothing on nil or after they ended.
func (e *Early) Stop() {
	if e == nil {
		return
	}
	e.cancel()
	<-e.done
}
