package cli

import (
	"bytes"
	"log/slog"
	"testing"
)

func TestVerbLog(t *testing.T) {
	var quiet, verbose bytes.Buffer
	l := (&Stdio{Err: &quiet}).VerbLog("boot", slog.LevelWarn)
	l.Info("progress", "stage", "boot")
	l.Warn("KVM unusable", "reason", `QEMU "aborted"`, "n", 3)
	if got, want := quiet.String(), "lockstep boot: warn: KVM unusable reason=\"QEMU \\\"aborted\\\"\" n=3\n"; got != want {
		t.Errorf("quiet logger wrote %q, want %q (no progress off a terminal)", got, want)
	}
	(&Stdio{Err: &verbose, Verbose: true}).VerbLog("selftest", slog.LevelWarn).Debug("detail")
	if got, want := verbose.String(), "lockstep selftest: detail\n"; got != want {
		t.Errorf("-v logger wrote %q, want %q", got, want)
	}
}
