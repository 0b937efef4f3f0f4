package schedule

import (
	"context"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
)

// Kind is what happened to a step.
type Kind string

// The kinds of events, in the order a step can have them: started, then
// cancelled (its result stopped being wanted while it ran) and kept or
// discarded.
const (
	Started   Kind = "started"
	Cancelled Kind = "cancelled"
	Kept      Kind = "kept"
	Discarded Kind = "discarded"
)

// Event is one entry of a Log: the step's name and what happened to it.
type Event struct {
	Step string `json:"step"`
	Kind Kind   `json:"kind"`
}

// Log is the ordered record of a schedule's events. The zero Log is ready;
// a nil *Log records nothing. It is safe for concurrent use.
type Log struct {
	mu     sync.Mutex
	events []Event
	// OnEvent, when set, is called with every event as it is recorded
	// (under the log's lock, so in order): a debug log line, say.
	OnEvent func(Event)
}

// Note records that kind happened to step: for what a caller decides
// itself, such as cancelling a run it started without this package.
func (l *Log) Note(step string, kind Kind) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := Event{Step: step, Kind: kind}
	l.events = append(l.events, e)
	if l.OnEvent != nil {
		l.OnEvent(e)
	}
}

// Events returns a copy of the events so far, in order.
func (l *Log) Events() []Event {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// Steps returns the steps that had an event of kind, in order.
func (l *Log) Steps(kind Kind) []string {
	var out []string
	for _, e := range l.Events() {
		if e.Kind == kind {
			out = append(out, e.Step)
		}
	}
	return out
}

// Task is one step running beside its caller, with a result of type T.
type Task[T any] struct {
	step   string
	log    *Log
	cancel context.CancelFunc
	g      errgroup.Group
	res    T
	once   sync.Once
}

// Go starts fn as step beside the caller and records Started. fn's context
// ends when ctx does or when the step is discarded or cancelled.
func Go[T any](ctx context.Context, log *Log, step string, fn func(ctx context.Context) (T, error)) *Task[T] {
	ctx, cancel := context.WithCancel(ctx)
	t := &Task[T]{step: step, log: log, cancel: cancel}
	log.Note(step, Started)
	t.g.Go(func() error {
		var err error
		t.res, err = fn(ctx)
		return err
	})
	return t
}

// Step is the task's name in the log.
func (t *Task[T]) Step() string { return t.step }

// Keep waits for the step to end, records Kept and returns its result.
func (t *Task[T]) Keep() (T, error) {
	err := t.g.Wait()
	t.end(Kept)
	return t.res, err
}

// Discard cancels the step, waits for it to end and records Discarded;
// nothing it did is returned.
func (t *Task[T]) Discard() {
	t.cancel()
	_ = t.g.Wait()
	t.end(Discarded)
}

// end releases the step's context and records how it ended, once.
func (t *Task[T]) end(kind Kind) {
	t.once.Do(func() {
		t.cancel()
		t.log.Note(t.step, kind)
	})
}
