package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

func TestRecordUsage(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.script")
	if err := os.WriteFile(script, []byte("expect x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		Name string
		Args []string
		Err  string
	}{
		{"NoSub", []string{"record"}, "no sub-verb"},
		{"UnknownSub", []string{"record", "replay", "--name", "n"}, "unknown sub-verb"},
		{"NoName", []string{"record", "generate"}, "--name"},
		{"PathName", []string{"record", "generate", "--name", "../x"}, "plain name"},
		{"CheckNoScript", []string{"record", "check", "--name", "n", "--", "python3"}, "--script is required"},
		{"RunNoCommand", []string{"record", "run", "--name", "n", "--script", script}, "no command"},
		{"RunLockstepRole", []string{"record", "run", "--name", "n", "--script", script, "--", "env", "LOCKSTEP_ROLE=enforcer-child", "sh"}, "lockstep's own files or roles"},
		{"RunGuestBinary", []string{"record", "run", "--name", "n", "--script", script, "--", "/run/lockstep/lockstep", "run"}, "lockstep's own files or roles"},
		{"DiffCommand", []string{"record", "diff", "--name", "n", "--", "true"}, "takes no command"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			code, _, errs := runCLI(t, tc.Args...)
			if code != cli.ExitUsage || !strings.Contains(errs, tc.Err) || !strings.Contains(errs, "usage: lockstep record") {
				t.Errorf("lockstep %v = %d, stderr %q; want 2 with %q and the usage line", tc.Args, code, errs, tc.Err)
			}
		})
	}
}

// The help says first that the recorded program runs unsandboxed, and its
// example's first line says it too.
func TestRecordHelpSaysUnsandboxed(t *testing.T) {
	code, out, _ := runCLI(t, "record", "--help")
	if code != cli.ExitOK {
		t.Fatalf("record --help = %d", code)
	}
	_, long, _ := strings.Cut(out, "\n\n")
	_, long, _ = strings.Cut(long, "\n\n")
	if !strings.HasPrefix(long, "The recorded program runs UNSANDBOXED") {
		t.Errorf("the help's first paragraph does not start with the warning:\n%s", out)
	}
	_, ex, _ := strings.Cut(out, "Example:\n")
	if !strings.HasPrefix(strings.TrimSpace(ex), "# The recorded program runs unsandboxed") {
		t.Errorf("the example's first line is not the warning:\n%s", ex)
	}
}
