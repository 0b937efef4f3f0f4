package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

// TestVerifyUnknownExercise: a --exercise name the key does not have is a
// usage error (2) naming it and the ones there are, found before any
// kernel is looked for (the kernel here does not exist).
func TestVerifyUnknownExercise(t *testing.T) {
	root, err := filepath.Abs("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "base.cfg")
	if err := os.WriteFile(base, []byte("[read]\n/usr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "--base", base, "--kernel", filepath.Join(t.TempDir(), "none", "bzImage"), "--exercises", root,
		"--key", "generic", "--exercise", "shell-reference", "--exercise", "shell-refrence"}
	var o, e bytes.Buffer
	code := run(t.Context(), args, &cli.Stdio{Out: &o, Err: &e})
	want := `--exercise "shell-refrence": no such exercise of key "generic"; there are: shell-reference`
	if code != cli.ExitUsage || !strings.Contains(e.String(), want) {
		t.Errorf("lockstep %s = %d, stderr %q; want %d naming %q", strings.Join(args, " "), code, e.String(), cli.ExitUsage, want)
	}
}

// TestVerifyBaseDirRefusals: --base-dir refuses --base beside it, and a base
// directory whose base has no exercise to verify against, before any kernel
// is looked for (the kernel here does not exist); both exit 2.
func TestVerifyBaseDirRefusals(t *testing.T) {
	root, err := filepath.Abs("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "BaseLanguage-swift.cfg"), []byte("[read]\n/usr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(t.TempDir(), "none", "bzImage")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--base-dir", dir, "--base", filepath.Join(dir, "BaseLanguage-swift.cfg")}, "--base and --exercise do not go with it"},
		{[]string{"--base-dir", dir}, `BaseLanguage-swift.cfg: no exercise of key "swift" under ` + root},
	} {
		args := append([]string{"verify", "--kernel", kernel, "--exercises", root}, c.args...)
		var o, e bytes.Buffer
		code := run(t.Context(), args, &cli.Stdio{Out: &o, Err: &e})
		if code != cli.ExitUsage || !strings.Contains(e.String(), c.want) {
			t.Errorf("lockstep %s = %d, stderr %q; want %d naming %q", strings.Join(args, " "), code, e.String(), cli.ExitUsage, c.want)
		}
	}
}

// TestVerifyTCGTimeFactor: a time factor below 1 or above 100 is a usage
// error (2), for --base and --base-dir alike, before any kernel is looked for.
func TestVerifyTCGTimeFactor(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none", "bzImage")
	for _, args := range [][]string{
		{"verify", "--base", "b.cfg", "--exercises", "e", "--kernel", none, "--tcg-time-factor", "0"},
		{"verify", "--base-dir", "bases", "--kernel", none, "--tcg-time-factor", "1000"},
	} {
		var o, e bytes.Buffer
		if code := run(t.Context(), args, &cli.Stdio{Out: &o, Err: &e}); code != cli.ExitUsage || !strings.Contains(e.String(), "--tcg-time-factor") {
			t.Errorf("lockstep %s = %d, stderr %q; want %d naming --tcg-time-factor", strings.Join(args, " "), code, e.String(), cli.ExitUsage)
		}
	}
}

// TestVerifySummarise fills the kernel matrix's table from a real leg's
// document (verify/testdata/matrix) for the plan generic × 6.12.117, 7.2.13:
// the Markdown says pass and missing, exit 3 (a missing leg is no pass),
// and the HTML page is written; --plan beside --summarise is a usage error.
func TestVerifySummarise(t *testing.T) {
	legs := t.TempDir()
	b, err := os.ReadFile("../../verify/testdata/matrix/generic-7.2.13.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(legs, "verify-generic-7.2.13"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legs, "verify-generic-7.2.13", "generic-7.2.13.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(t.TempDir(), "matrix.html")
	sel := []string{"--base-dir", "../../bases", "--exercises", "../../testdata/exercises", "--key", "generic", "--kernel", "6.12.117", "--kernel", "7.2.13"}
	var o, e bytes.Buffer
	code := run(t.Context(), append(append([]string{"verify", "--summarise", legs}, sel...), "--html", html), &cli.Stdio{Out: &o, Err: &e})
	if code != cli.ExitIndeterminate || !strings.Contains(o.String(), "| generic | missing | pass |") {
		t.Errorf("verify --summarise = %d, stdout %q, stderr %q; want %d and generic: missing, pass", code, o.String(), e.String(), cli.ExitIndeterminate)
	}
	if fi, err := os.Stat(html); err != nil || fi.Size() == 0 {
		t.Errorf("--html %s: %v", html, err)
	}
	o.Reset()
	e.Reset()
	if code := run(t.Context(), append([]string{"verify", "--plan", "--summarise", legs}, sel...), &cli.Stdio{Out: &o, Err: &e}); code != cli.ExitUsage || !strings.Contains(e.String(), "give one") {
		t.Errorf("verify --plan --summarise = %d, stderr %q; want a usage error", code, e.String())
	}
}
