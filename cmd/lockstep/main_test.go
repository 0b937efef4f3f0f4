package main

import (
	"os"
	"testing"
)

// TestMain makes this test binary a valid guest init, as main makes
// lockstep one: a test that boots a guest from within this process (the
// KVM probe's TCG control boot, for one) puts os.Executable() — this test
// binary — into the initramfs as /init, and without this it would run the
// tests as PID 1 and the kernel would panic ("Attempted to kill init").
func TestMain(m *testing.M) {
	// The guest's init, and the roles a prune run in this process starts
	// this binary as (each run as cold-run, each baseline run as ref-run
	// first: the prune's default cold program is the enforcer's binary,
	// os.Executable()), as lockstep's main would.
	if role, ok := helperRole(os.Args); ok && os.Getenv(roleEnv) == "" {
		os.Exit(role())
	}
	code := m.Run()
	if filesBinDir != "" {
		os.RemoveAll(filesBinDir)
	}
	os.Exit(code)
}
