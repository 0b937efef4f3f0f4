package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signal is the cause of a context that NotifyContext cancelled.
type Signal struct{ syscall.Signal }

func (s Signal) Error() string { return unix.SignalName(s.Signal) + " received" }

// NotifyContext returns a copy of parent that the first of sigs cancels,
// with that Signal as its cause, and the function that stops listening.
// A context made from another one's (a verb that catches more signals than
// main) is cancelled by whichever sees a signal first, with the same
// cause either way: a signal both listen for is delivered to both, and a
// cancelled parent hands its cause down.
func NotifyContext(parent context.Context, sigs ...os.Signal) (context.Context, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case s := <-ch:
			cancel(Signal{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}
