package main

import (
	"context"
	"os"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/pruner/cold"
)

// TestMain makes this test binary a valid guest init, as main makes
// lockstep one: a test that boots a guest from within this process (the
// KVM probe's TCG control boot, for one) puts os.Executable() — this test
// binary — into the initramfs as /init, and without this it would run the
// tests as PID 1 and the kernel would panic ("Attempted to kill init").
func TestMain(m *testing.M) {
	if os.Getpid() == 1 && os.Args[0] == "/init" && guestMain != nil {
		guestMain()
		return
	}
	// A prune run in this process starts each run as this binary's
	// cold-run verb, and each baseline run as its ref-run verb first (the
	// prune's default cold program is the enforcer's binary:
	// os.Executable()), as lockstep's main would.
	if len(os.Args) > 1 && (os.Args[1] == cold.Verb || os.Args[1] == refns.Verb) {
		os.Exit(run(context.Background(), os.Args[1:], newStdio()))
	}
	code := m.Run()
	if filesBinDir != "" {
		os.RemoveAll(filesBinDir)
	}
	os.Exit(code)
}
