package cli

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestNotifyContextNested: a verb's context made from main's, both
// listening for SIGINT, ends with the signal as its cause whichever of the
// two sees it first; a signal only the verb listens for ends the verb's
// context alone. Many rounds, so both orders occur.
func TestNotifyContextNested(t *testing.T) {
	for i := 0; i < 200; i++ {
		parent, stopParent := NotifyContext(context.Background(), syscall.SIGINT)
		ctx, stop := NotifyContext(parent, syscall.SIGINT, syscall.SIGHUP)
		sig := syscall.SIGINT
		if i%2 == 1 {
			sig = syscall.SIGHUP
		}
		if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: %v did not end the context", i, sig)
		}
		var got Signal
		if !errors.As(context.Cause(ctx), &got) || got.Signal != sig {
			t.Fatalf("round %d: cause %v, want %v received", i, context.Cause(ctx), sig)
		}
		if sig == syscall.SIGHUP && parent.Err() != nil {
			t.Fatalf("round %d: SIGHUP ended main's context too", i)
		}
		stop()
		stopParent()
	}
}

func TestSignalError(t *testing.T) {
	if got := (Signal{syscall.SIGTERM}).Error(); got != "SIGTERM received" {
		t.Errorf("Error() = %q", got)
	}
}
