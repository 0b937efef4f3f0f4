package main

import (
	"bytes"
	"log/slog"
	"testing"
)

func TestVerbLogger(t *testing.T) {
	var quiet, verbose bytes.Buffer
	l := verbLogger(&stdio{err: &quiet}, "boot", slog.LevelWarn)
	l.Info("progress", "stage", "boot")
	l.Warn("KVM unusable", "reason", `QEMU "aborted"`, "n", 3)
	if got, want := quiet.String(), "lockstep boot: warn: KVM unusable reason=\"QEMU \\\"aborted\\\"\" n=3\n"; got != want {
		t.Errorf("quiet logger wrote %q, want %q (no progress off a terminal)", got, want)
	}
	verbLogger(&stdio{err: &verbose, verbose: true}, "selftest", slog.LevelWarn).Debug("detail")
	if got, want := verbose.String(), "lockstep selftest: detail\n"; got != want {
		t.Errorf("-v logger wrote %q, want %q", got, want)
	}
}
