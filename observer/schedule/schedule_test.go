package schedule

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestKeep: a kept step's result and error come back, and the log has its
// start and its keeping, in order.
func TestKeep(t *testing.T) {
	log := &Log{}
	want := errors.New("refused")
	task := Go(t.Context(), log, "diagnosis", func(ctx context.Context) (int, error) { return 7, want })
	got, err := task.Keep()
	if got != 7 || !errors.Is(err, want) {
		t.Errorf("Keep() = %d, %v; want 7, %v", got, err, want)
	}
	if ev := log.Events(); !reflect.DeepEqual(ev, []Event{{"diagnosis", Started}, {"diagnosis", Kept}}) {
		t.Errorf("events %v", ev)
	}
}

// TestDiscard: a discarded step's context is cancelled, Discard returns only
// once it has ended, and the log says so; a second ending records nothing.
func TestDiscard(t *testing.T) {
	log := &Log{}
	ended := false
	task := Go(t.Context(), log, "containment checks", func(ctx context.Context) (struct{}, error) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		ended = true
		return struct{}{}, ctx.Err()
	})
	task.Discard()
	if !ended {
		t.Error("Discard returned before the step ended")
	}
	task.Discard()
	if got := log.Steps(Discarded); !reflect.DeepEqual(got, []string{"containment checks"}) {
		t.Errorf("discarded steps %v, want the containment checks once", got)
	}
}

// TestParentCancel: cancelling the caller's context ends a step too.
func TestParentCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	task := Go(ctx, nil, "reference runs", func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	cancel()
	if _, err := task.Keep(); !errors.Is(err, context.Canceled) {
		t.Errorf("Keep() after the parent's cancel = %v, want context.Canceled", err)
	}
}

// TestOnEvent sees every event in order, and a nil log records nothing.
func TestOnEvent(t *testing.T) {
	var seen []Event
	log := &Log{OnEvent: func(e Event) { seen = append(seen, e) }}
	log.Note("cross-check", Cancelled)
	if !reflect.DeepEqual(seen, []Event{{"cross-check", Cancelled}}) {
		t.Errorf("OnEvent saw %v", seen)
	}
	var none *Log
	none.Note("x", Started)
	if none.Events() != nil || none.Steps(Started) != nil {
		t.Error("a nil log recorded an event")
	}
}
