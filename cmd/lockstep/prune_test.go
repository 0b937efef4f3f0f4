package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneVerb: usage errors, the refusal on a machine not declared
// disposable, and an aborting exercise on a disposable one (it aborts at its
// baseline, before the enforcer is needed): exit 1, an abort record, no .cfg.
func TestPruneVerb(t *testing.T) {
	root, err := filepath.Abs("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, tc := range []struct {
		Name string
		Args []string
		Env  string
		Code int
		Err  string
	}{
		{"bad key", []string{"prune", "--key", "Bad_Key", "--exercises", root, "--out", out}, "", exitUsage, "--key"},
		{"missing out", []string{"prune", "--key", "generic", "--exercises", root}, "", exitUsage, "required"},
		{"both modes", []string{"prune", "--key", "generic", "--exercises", root, "--out", out, "--in-guest", "--on-host"}, "", exitUsage, "exclude"},
		{"no exercise of the key", []string{"prune", "--key", "nothing-here", "--exercises", root, "--out", out, "--on-host"}, "1", exitFail, "no exercise of key"},
		{"not disposable", []string{"prune", "--key", "broken", "--exercises", root, "--out", out, "--on-host"}, "", exitRefused, "LOCKSTEP_DISPOSABLE=1"},
		{"aborts", []string{"prune", "--key", "broken", "--exercises", root, "--out", out, "--on-host", "--work-dir", filepath.Join(t.TempDir(), "testing-dir")}, "1", exitFail, "aborted: baseline run 1: the reference fails its own tests"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			t.Setenv("LOCKSTEP_DISPOSABLE", tc.Env)
			t.Setenv("LOCKSTEP_GUEST", "")
			var o, e bytes.Buffer
			if code := run(t.Context(), tc.Args, &stdio{out: &o, err: &e}); code != tc.Code || !strings.Contains(e.String(), tc.Err) {
				t.Errorf("lockstep %s = %d, stderr %q; want %d and %q", strings.Join(tc.Args, " "), code, e.String(), tc.Code, tc.Err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "broken_failing-test.aborted.json")); err != nil {
		t.Errorf("no abort record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "broken_failing-test.cfg")); !os.IsNotExist(err) {
		t.Errorf("an aborted exercise left a .cfg: %v", err)
	}
}
