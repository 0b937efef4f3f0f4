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
	if os.Getpid() == 1 && os.Args[0] == "/init" && guestMain != nil {
		guestMain()
		return
	}
	code := m.Run()
	if filesBinDir != "" {
		os.RemoveAll(filesBinDir)
	}
	os.Exit(code)
}
