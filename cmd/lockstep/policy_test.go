package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy/tool"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestPolicyVerb(t *testing.T) {
	dir := t.TempDir()
	messy := filepath.Join(dir, "messy.cfg")
	if err := os.WriteFile(messy, []byte("[write]\n/tmp\n[read]\n/usr   # system\n/etc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.cfg")
	if err := os.WriteFile(bad, []byte("[read]\nrel\n[bind]\nallow 00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	java := "../../testdata/policies/BaseLanguage-java.cfg"
	python := "../../testdata/policies/BaseLanguage-python.cfg"

	for _, tc := range []struct {
		Name     string
		Args     []string
		Code     int
		Out, Err string
		NotOut   string
	}{
		{"check ok", []string{"policy", "check", java}, 0, ": ok sha256:", "", ""},
		{"check problems", []string{"policy", "check", bad}, 1, "2 problems", "bad.cfg:2: [read] path \"rel\" is not absolute", ""},
		{"check flag after files", []string{"policy", "check", "--json", bad}, 1, `"schema_version": 1`, "", ""},
		{"fmt prints canonical", []string{"policy", "fmt", messy}, 0, "[read]\n/etc\n# system\n/usr\n\n[write]\n/tmp\n", "", ""},
		{"fmt -l", []string{"policy", "fmt", "-l", messy}, 1, "messy.cfg", "", ""},
		{"hash", []string{"policy", "hash", messy}, 0, "sha256:", "", ""},
		{"diff same", []string{"policy", "diff", java, java}, 0, "", "", "[read]"},
		{"diff differs", []string{"policy", "diff", java, python}, 1, "+ [read] /usr/lib/python3.11", "", ""},
		{"union", []string{"policy", "union", java, python}, 0, "/usr/lib/python3.11\n", "", "[limits]"},
		{"no subcommand", []string{"policy"}, 2, "", "no subcommand", ""},
		{"unknown subcommand", []string{"policy", "lint", java}, 2, "", "unknown subcommand", ""},
		{"diff arity", []string{"policy", "diff", java}, 2, "", "exactly two files", ""},
		{"no files", []string{"policy", "hash"}, 2, "", "no files", ""},
		{"-w with -l", []string{"policy", "fmt", "-w", "-l", messy}, 2, "", "exclude each other", ""},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.Args...)
			if code != tc.Code || !strings.Contains(out, tc.Out) || !strings.Contains(errs, tc.Err) || (tc.NotOut != "" && strings.Contains(out, tc.NotOut)) {
				t.Fatalf("lockstep %s = %d\nstdout:\n%s\nstderr:\n%s\nwant %d, stdout with %q, stderr with %q", strings.Join(tc.Args, " "), code, out, errs, tc.Code, tc.Out, tc.Err)
			}
		})
	}

	// hash of the canonical form equals hash of the messy file; fmt -w makes -l quiet.
	_, h1, _ := runCLI(t, "policy", "hash", messy)
	if code, _, errs := runCLI(t, "policy", "fmt", "-w", messy); code != 0 {
		t.Fatalf("fmt -w = %d: %s", code, errs)
	}
	if code, out, _ := runCLI(t, "policy", "fmt", "-l", messy); code != 0 || out != "" {
		t.Fatalf("fmt -l after -w = %d %q", code, out)
	}
	_, h2, _ := runCLI(t, "policy", "hash", messy)
	if h1 != h2 {
		t.Fatalf("hash changed by fmt -w: %s vs %s", h1, h2)
	}
	if fi, _ := os.Stat(messy); fi.Mode().Perm() != 0o600 {
		t.Fatalf("fmt -w changed the mode to %v", fi.Mode().Perm())
	}

	_, out, _ := runCLI(t, "policy", "check", "--json", bad, java)
	var rep tool.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Files) != 2 || rep.Files[0].OK || len(rep.Files[0].Problems) != 2 || !rep.Files[1].OK {
		t.Fatalf("check --json = %v %+v", err, rep)
	}
}

// TestWriteJSONFullDisk: a JSON result that cannot be written whole (here
// to /dev/full: ENOSPC) is never a clean status: the verb says so, and a
// pass becomes the failure status given, while a finding (1) stays one.
func TestWriteJSONFullDisk(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	for _, tc := range []struct{ code, failed, want int }{
		{cli.ExitOK, cli.ExitIndeterminate, cli.ExitIndeterminate},
		{cli.ExitFail, cli.ExitIndeterminate, cli.ExitFail},
		{cli.ExitOK, cli.ExitFail, cli.ExitFail},
	} {
		var errb bytes.Buffer
		got := writeJSON(&cli.Stdio{Out: full, Err: &errb}, "verify", map[string]int{"status": tc.code}, tc.code, tc.failed)
		if got != tc.want || !strings.Contains(errb.String(), "lockstep verify: the JSON result was not written whole") {
			t.Errorf("writeJSON(code %d, failed %d) to /dev/full = %d, stderr %q; want %d and the reason", tc.code, tc.failed, got, errb.String(), tc.want)
		}
	}
}
