package main

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

// TestReproVerifyUsage: the command lines repro and verify refuse, each with
// exit 2 and the usage line, before anything runs.
func TestReproVerifyUsage(t *testing.T) {
	cfg := "../../repro/testdata/udp.cfg"
	for _, tc := range []struct {
		Name string
		Args []string
		Err  string
	}{
		{"ReproOneKernel", []string{"repro", "--kernel", "host", "--config", cfg, "--", "true"}, "want exactly two kernels"},
		{"ReproNoCommand", []string{"repro", "--kernel", "host", "--kernel", "host", "--config", cfg}, "no command"},
		{"ReproNoPolicy", []string{"repro", "--kernel", "host", "--kernel", "host", "--", "true"}, "no policy"},
		{"ReproBadAccel", []string{"repro", "--kernel", "host", "--kernel", "7.2.13", "--accel", "hvf", "--config", cfg, "--", "true"}, "want auto, kvm or tcg"},
		{"ReproInGuestOutside", []string{"repro", "--in-guest", "--config", cfg, "--", "true"}, "needs --out"},
		{"VerifyNoBase", []string{"verify", "--kernel", "7.2.13", "--exercises", "../../verify/testdata/exercises"}, "--base, --exercises and at least one --kernel"},
		{"VerifyNoKernel", []string{"verify", "--base", cfg, "--exercises", "../../verify/testdata/exercises"}, "at least one --kernel"},
		{"VerifyArgs", []string{"verify", "--base", cfg, "--kernel", "7.2.13", "--exercises", "x", "extra"}, "unexpected arguments"},
		// No joint run would leave nothing to disagree: a pass everywhere.
		{"VerifyNoJointRuns", []string{"verify", "--base", cfg, "--kernel", "7.2.13", "--exercises", "x", "--joint-runs", "-1"}, "want at least 1 joint run"},
		{"VerifyNoJointRunsInGuest", []string{"verify", "--in-guest", "--config", cfg, "--exercises", "x", "--key", "k", "--joint-runs", "0"}, "want at least 1 joint run"},
		{"VerifyNegativeParallel", []string{"verify", "--base", cfg, "--kernel", "7.2.13", "--exercises", "x", "--parallel", "-2"}, "0 or more guests at once"},
		{"VerifyInGuestOneExercise", []string{"verify", "--in-guest", "--config", cfg, "--exercises", "x", "--key", "k"}, "one --exercise"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			code, _, errs := runCLI(t, tc.Args...)
			if code != cli.ExitUsage || !strings.Contains(errs, tc.Err) || !strings.Contains(errs, "usage: lockstep") {
				t.Errorf("lockstep %v = %d, stderr %q; want 2 with %q and the usage line", tc.Args, code, errs, tc.Err)
			}
		})
	}
}
