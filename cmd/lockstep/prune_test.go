package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/record"
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
		{"bad key", []string{"prune", "--key", "Bad_Key", "--exercises", root, "--out", out}, "", cli.ExitUsage, "--key"},
		{"missing out", []string{"prune", "--key", "generic", "--exercises", root}, "", cli.ExitUsage, "required"},
		{"both modes", []string{"prune", "--key", "generic", "--exercises", root, "--out", out, "--in-guest", "--on-host"}, "", cli.ExitUsage, "exclude"},
		{"no exercise of the key", []string{"prune", "--key", "nothing-here", "--exercises", root, "--out", out, "--on-host"}, "1", cli.ExitFail, "no exercise of key"},
		{"not disposable", []string{"prune", "--key", "broken", "--exercises", root, "--out", out, "--on-host"}, "", cli.ExitRefused, "LOCKSTEP_DISPOSABLE=1"},
		{"unknown --only", []string{"prune", "--key", "broken", "--exercises", root, "--out", out, "--on-host", "--only", "failing-tset"}, "1", cli.ExitUsage, `--only "failing-tset": no such exercise of key "broken"; there are: failing-test`},
		{"aborts", []string{"prune", "--key", "broken", "--exercises", root, "--out", out, "--on-host", "--skip-containment", "--work-dir", filepath.Join(t.TempDir(), "testing-dir")}, "1", cli.ExitFail, "aborted: baseline run 1: the reference fails its own tests"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			t.Setenv("LOCKSTEP_DISPOSABLE", tc.Env)
			t.Setenv("LOCKSTEP_GUEST", "")
			var o, e bytes.Buffer
			if code := run(t.Context(), tc.Args, &cli.Stdio{Out: &o, Err: &e}); code != tc.Code || !strings.Contains(e.String(), tc.Err) {
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

// TestPruneRefusalKeepsOut: a prune that is refused (a machine not declared
// disposable, a kernel or a QEMU that cannot be had) leaves the key's earlier
// artefacts in --out; before, they were removed first.
func TestPruneRefusalKeepsOut(t *testing.T) {
	root, err := filepath.Abs("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	earlier := filepath.Join(out, "broken_failing-test.cfg")
	bz := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(bz, []byte("never booted: QEMU is missing"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		Name string
		Args []string
		Code int
	}{
		{"not disposable", []string{"--on-host"}, cli.ExitRefused},
		{"no kernel", []string{"--kernel", filepath.Join(t.TempDir(), "none", "bzImage")}, cli.ExitFail},
		{"no QEMU", []string{"--kernel", bz}, cli.ExitFail},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			t.Setenv("LOCKSTEP_QEMU", filepath.Join(t.TempDir(), "no-qemu"))
			if err := os.WriteFile(earlier, []byte("[read]\n/usr\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("LOCKSTEP_DISPOSABLE", "")
			t.Setenv("LOCKSTEP_GUEST", "")
			args := append([]string{"prune", "--key", "broken", "--exercises", root, "--out", out}, tc.Args...)
			var o, e bytes.Buffer
			if code := run(t.Context(), args, &cli.Stdio{Out: &o, Err: &e}); code != tc.Code {
				t.Fatalf("lockstep %s = %d, stderr %q; want %d", strings.Join(args, " "), code, e.String(), tc.Code)
			}
			if _, err := os.Stat(earlier); err != nil {
				t.Errorf("the refused prune removed the earlier %s: %v", filepath.Base(earlier), err)
			}
		})
	}
}

// TestPruneGuest prunes the generic exercise the default way, in a guest on
// the pinned kernel (the acceptance test of lockstep prune): a policy and a
// record that vouches for it, every grant needed (--check-minimality), every
// containment check held or unchecked with a reason. Minutes under KVM, about
// twenty under TCG on a busy machine.
func TestPruneGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a guest prune takes minutes")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not on PATH")
	}
	bin := lockstepbin.Build(t)
	root, _ := filepath.Abs("../../testdata/exercises")
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "prune", "--key", "generic", "--exercises", root, "--out", out, "--check-minimality")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lockstep prune in a guest: %v\n%s", err, b)
	}
	cfg, err := os.ReadFile(filepath.Join(out, "generic_shell-reference.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ReadExercise(filepath.Join(out, "generic_shell-reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Vouches(cfg); err != nil {
		t.Error(err)
	}
	if rec.Provenance.LandlockABI < 10 {
		t.Errorf("the guest's Landlock ABI is %d, want the pin's 10", rec.Provenance.LandlockABI)
	}
	summaries := 0
	for _, e := range rec.Log {
		switch e.Stage {
		case "minimality":
			// The check's runs are logged under the same stage; its
			// summary is the entry that carries "needed".
			if _, ok := e.Fields["needed"]; !ok {
				continue
			}
			summaries++
			if nn, _ := e.Fields["not_needed"].([]any); len(nn) > 0 {
				t.Errorf("grants the exercise passes without: %v", nn)
			}
			if n, _ := e.Fields["needed"].([]any); len(n) == 0 {
				t.Error("the minimality check found no needed grant")
			}
		case "containment":
			for _, c := range e.Fields["checks"].([]any) {
				m := c.(map[string]any)
				if m["refused"] != true && m["unchecked"] == nil {
					t.Errorf("containment check %v did not hold", m["name"])
				}
				// The guest's PID 1 mounts cgroup v2, so the enforcer caps
				// processes even for uid 0, whom RLIMIT_NPROC does not bind.
				if m["name"] == "limit nproc" && m["refused"] != true {
					t.Errorf("containment check limit nproc: %v, want refused in the guest", m)
				}
			}
		}
	}
	if summaries != 1 {
		t.Errorf("the record has %d minimality summaries, want 1 (--check-minimality)", summaries)
	}
}

// TestPruneAllKeys: --key all prunes every key of the exercise tree in key
// order, each into its own <out>/<key>; the first key's abort does not stop
// the second, whose abort record lands in its own directory, and the status
// is the worst. In the guest, and with --only, all is a usage error.
func TestPruneAllKeys(t *testing.T) {
	root := t.TempDir()
	src, err := filepath.Abs("../../testdata/exercises/broken/failing-test")
	if err != nil {
		t.Fatal(err)
	}
	// Two keys, each an exercise that aborts at its baseline (before the
	// enforcer is needed): the key comes from the family's name.
	for _, k := range []string{"beta", "alpha"} {
		dst := filepath.Join(root, k, "failing-test")
		if err := os.MkdirAll(filepath.Join(root, k), 0o755); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, b)
		}
		cfg := `{"key": "` + k + `", "report_globs": ["test-reports/*.xml"]}`
		if err := os.WriteFile(filepath.Join(dst, "prune.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	t.Setenv("LOCKSTEP_GUEST", "")
	var o, e bytes.Buffer
	args := []string{"prune", "--on-host", "--key", "all", "--exercises", root, "--out", out, "--skip-containment",
		"--work-dir", filepath.Join(t.TempDir(), "testing-dir")}
	if code := run(t.Context(), args, &cli.Stdio{Out: &o, Err: &e}); code != cli.ExitFail {
		t.Fatalf("lockstep %s = %d, want %d; stdout %q, stderr %q", strings.Join(args, " "), code, cli.ExitFail, o.String(), e.String())
	}
	a, b := strings.Index(o.String(), "key alpha: out "+filepath.Join(out, "alpha")), strings.Index(o.String(), "key beta: out "+filepath.Join(out, "beta"))
	if a < 0 || b < a {
		t.Errorf("keys not visited in order: %q", o.String())
	}
	if !strings.Contains(o.String(), "every key (alpha, beta): status 1") {
		t.Errorf("no summary line: %q", o.String())
	}
	for _, k := range []string{"alpha", "beta"} {
		if _, err := os.Stat(filepath.Join(out, k, k+"_failing-test.aborted.json")); err != nil {
			t.Errorf("key %s: no abort record in its own directory: %v", k, err)
		}
	}
	for _, tc := range [][]string{{"--in-guest"}, {"--on-host", "--only", "failing-test"}} {
		e.Reset()
		args := append([]string{"prune", "--key", "all", "--exercises", root, "--out", out}, tc...)
		if code := run(t.Context(), args, &cli.Stdio{Out: &o, Err: &e}); code != cli.ExitUsage || !strings.Contains(e.String(), "--key all") {
			t.Errorf("lockstep %s = %d, %q; want a usage error naming --key all", strings.Join(args, " "), code, e.String())
		}
	}
}

// TestPruneListKeys: --list-keys prints the keys --key all prunes, one a
// line, in its order; it takes no other key and needs --exercises.
func TestPruneListKeys(t *testing.T) {
	var o, e bytes.Buffer
	root := "../../testdata/exercises"
	if code := run(t.Context(), []string{"prune", "--list-keys", "--exercises", root}, &cli.Stdio{Out: &o, Err: &e}); code != cli.ExitOK {
		t.Fatalf("status %d, stderr %q", code, e.String())
	}
	keys, err := exercise.EveryKey(root, allKeys)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.String(), strings.Join(keys, "\n")+"\n"; got != want || len(keys) < 2 {
		t.Errorf("printed %q, want %q (the keys of --key all)", got, want)
	}
	for _, args := range [][]string{{"--list-keys"}, {"--list-keys", "--exercises", root, "--key", "c"}} {
		e.Reset()
		if code := run(t.Context(), append([]string{"prune"}, args...), &cli.Stdio{Out: &o, Err: &e}); code != cli.ExitUsage {
			t.Errorf("prune %q = %d, want a usage error; stderr %q", args, code, e.String())
		}
	}
}
