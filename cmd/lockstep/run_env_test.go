package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// runBin runs the lockstep binary with args and extra environment, and
// returns its exit status, stdout and stderr.
func runBin(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// TestRunEnvironment: the caller's secrets (a token, a cloud key, the SSH
// agent) and LD_PRELOAD do not reach the command; PATH does; --env passes
// a variable or sets one; --env-file does the same from a file, LD_PRELOAD
// included when named there; a bad --env is a usage error. --exec (lockstep
// becomes the command) scrubs the same.
func TestRunEnvironment(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	cfg := filepath.Join(d, "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(d, "e.env")
	if err := os.WriteFile(envFile, []byte("# asked for on purpose\nLD_PRELOAD\nFROM_FILE=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"GITHUB_TOKEN=ghp_secret", "AWS_SECRET_ACCESS_KEY=aws_secret", "SSH_AUTH_SOCK=/run/agent.sock",
		"LD_PRELOAD=/nonexistent/libpreload.so", "LOCKSTEP_TEST_OTHER=x"}
	for _, tc := range []struct {
		name      string
		flags     []string
		has, lack []string
	}{
		{"default", nil, []string{"PATH="}, []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "LD_PRELOAD", "LOCKSTEP_"}},
		{"default --exec", []string{"--exec"}, []string{"PATH="}, []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "LD_PRELOAD", "LOCKSTEP_"}},
		{"--env", []string{"--env", "GITHUB_TOKEN", "--env", "SET_HERE=a b=c"},
			[]string{"GITHUB_TOKEN=ghp_secret", "SET_HERE=a b=c"}, []string{"AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "LD_PRELOAD"}},
		{"--env-file", []string{"--env-file", envFile, "--env", "FROM_FILE=2"},
			[]string{"LD_PRELOAD=/nonexistent/libpreload.so", "FROM_FILE=2"}, []string{"GITHUB_TOKEN", "FROM_FILE=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "-q", "--config", cfg}, tc.flags...), "--", "env")
			code, out, errs := runBin(t, bin, secrets, args...)
			if code != 0 {
				t.Fatalf("lockstep %q = %d\n%s", args, code, errs)
			}
			for _, h := range tc.has {
				if !strings.Contains(out, h) {
					t.Errorf("the command's environment lacks %q:\n%s", h, out)
				}
			}
			for _, l := range tc.lack {
				if strings.Contains(out, l) {
					t.Errorf("the command's environment has %q:\n%s", l, out)
				}
			}
		})
	}
	for _, tc := range []struct {
		flags []string
		want  int
		msg   string
	}{
		{[]string{"--env", "A B=1"}, cli.ExitUsage, "usage: lockstep run"},
		{[]string{"--env", "=x"}, cli.ExitUsage, "usage: lockstep run"},
		{[]string{"--env-file", d}, cli.ExitRefused, "not a regular file"},
		{[]string{"--env-file", filepath.Join(d, "missing")}, cli.ExitRefused, "no such file"},
	} {
		args := append(append([]string{"run", "--config", cfg}, tc.flags...), "--", "true")
		if code, _, errs := runBin(t, bin, nil, args...); code != tc.want || !strings.Contains(errs, tc.msg) {
			t.Errorf("lockstep %q = %d, want %d with %q\n%s", args, code, tc.want, tc.msg, errs)
		}
	}
}

// TestRunUnrestrictedAndRequireABI: the status line names what this
// kernel's ABI leaves unrestricted; --require-abi above the kernel's ABI
// refuses (125) naming both numbers and what stays open, and at the
// kernel's ABI runs the command.
func TestRunUnrestrictedAndRequireABI(t *testing.T) {
	abi, err := enforcer.HostABI()
	if err != nil {
		t.Fatal(err)
	}
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runBin(t, bin, nil, "run", "--config", cfg, "--", "true")
	gaps := landlock.GapNames(landlock.Unrestricted(abi))
	if code != 0 || gaps != "" && !strings.Contains(errs, " unrestricted="+gaps) {
		t.Errorf("lockstep run = %d, status line %q; want unrestricted=%s (ABI %d)", code, errs, gaps, abi)
	}
	if abi < landlock.ABIUDP && !strings.Contains(gaps, "udp") {
		t.Errorf("ABI %d: unrestricted=%s does not name udp", abi, gaps)
	}
	code, _, errs = runBin(t, bin, nil, "run", "--require-abi", fmt.Sprint(abi), "--config", cfg, "--", "true")
	if code != 0 {
		t.Errorf("--require-abi %d on ABI %d = %d, want 0\n%s", abi, abi, code, errs)
	}
	want := fmt.Sprintf("ABI is %d, lower than the %d required", abi, abi+1)
	code, _, errs = runBin(t, bin, nil, "run", "--require-abi", fmt.Sprint(abi+1), "--config", cfg, "--", "true")
	if code != cli.ExitRefused || !strings.Contains(errs, want) || !strings.Contains(errs, "Nothing ran") {
		t.Errorf("--require-abi %d on ABI %d = %d, stderr %q; want %d with %q", abi+1, abi, code, errs, cli.ExitRefused, want)
	}
	if abi < landlock.ABIResolveUnix {
		code, _, errs = runBin(t, bin, nil, "run", "--require-abi", fmt.Sprint(landlock.ABIResolveUnix), "--config", cfg, "--", "true")
		if code != cli.ExitRefused || !strings.Contains(errs, "unix-connect (") {
			t.Errorf("--require-abi %d on ABI %d = %d, stderr %q; want %d naming unix-connect", landlock.ABIResolveUnix, abi, code, errs, cli.ExitRefused)
		}
	}
}
