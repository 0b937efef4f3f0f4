// Package schedule is the small executor under the KVM run's schedule: a
// step that runs beside the caller ([Go]) has a typed result, is cancelled
// when its result is no longer wanted ([Task.Discard]) or waited for when
// it is ([Task.Keep]), and every start, cancellation and outcome is an
// [Event] in a [Log], so tests assert on what ran beside what, not on
// progress text.
//
//	log := &schedule.Log{}
//	diag := schedule.Go(ctx, log, "diagnosis", func(ctx context.Context) (*engine.Observed, error) { … })
//	first, err := runFirstJoint(ctx)
//	if differs(first) {
//		ob, err := diag.Keep() // wanted: wait for it
//	} else {
//		diag.Discard() // not wanted: cancel it, wait, drop what it did
//	}
//
// A step's goroutine is the executor's own (golang.org/x/sync/errgroup): a
// step touches no state of its caller but what its result carries, which
// the caller reads after Keep.
package schedule
