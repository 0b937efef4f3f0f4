package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// TestPolicyCheckWarnsWideGrants is the acceptance of a [read] row naming a
// symbolic link to /, through the real binary: check names what the link
// grants and exits 0, --strict exits 1, and -v run prints the resolution.
// The parser alone saw nothing: the row is a plain absolute path.
func TestPolicyCheckWarnsWideGrants(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	link := filepath.Join(d, "all")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(d, "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n"+link+"\n/proc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wants := []string{
		"warning: W001 " + link + " → /: [read] names a symbolic link out of " + d + " to the directory /",
		"warning: W002 " + link + " → /: [read] on / is the whole file system",
		"warning: W003 /proc: [read] on /proc whole exposes every process's environ",
	}
	code, out, errs := runBin(t, bin, nil, "policy", "check", cfg)
	if code != 0 || !strings.Contains(out, "3 warnings") {
		t.Errorf("policy check = %d, stdout %q; want 0 and 3 warnings", code, out)
	}
	for _, w := range wants {
		if !strings.Contains(errs, w) {
			t.Errorf("policy check stderr\n%s\nlacks %q", errs, w)
		}
	}
	if code, out, _ := runBin(t, bin, nil, "policy", "check", "--strict", cfg); code != cli.ExitFail || !strings.Contains(out, "refused by --strict") {
		t.Errorf("policy check --strict = %d, stdout %q; want 1", code, out)
	}
	if code, out, _ := runBin(t, bin, nil, "policy", "check", "--strict", "--json", cfg); code != cli.ExitFail || !strings.Contains(out, `"ok": false`) || !strings.Contains(out, "W001 "+link+" → /") {
		t.Errorf("policy check --strict --json = %d\n%s\nwant 1, ok false and the W001 warning", code, out)
	}
	// Without warnings --strict passes.
	plain := filepath.Join(d, "plain.cfg")
	if err := os.WriteFile(plain, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runBin(t, bin, nil, "policy", "check", "--strict", plain); code != 0 || errs != "" {
		t.Errorf("policy check --strict on a plain policy = %d, %q, %q; want 0 and no warning", code, out, errs)
	}
	code, _, errs = runBin(t, bin, nil, "-v", "run", "--config", cfg, "--", "true")
	if code != 0 || !strings.Contains(errs, "lockstep run: link "+link+" → / (a directory: [read] grants everything beneath it)") {
		t.Errorf("-v run = %d, stderr\n%s\nwant the link's resolution", code, errs)
	}
}

// TestPolicyCheckRefusesMagicLinks: a row through a /proc magic link
// (/proc/self/root is /) is a problem for `policy check`, with and without
// --strict, also when it reaches the link through a link to /proc/self.
func TestPolicyCheckRefusesMagicLinks(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	me := filepath.Join(d, "me")
	if err := os.Symlink("/proc/self", me); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"/proc/self/root", "/proc/self/root/etc", "/proc/thread-self/cwd", "/proc/1/root", me + "/root"} {
		cfg := filepath.Join(d, "p.cfg")
		if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n"+row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"policy", "check", cfg}, {"policy", "check", "--strict", cfg}} {
			code, out, errs := runBin(t, bin, nil, args...)
			if code != cli.ExitFail || !strings.Contains(out, ": 1 problem\n") || !strings.Contains(errs, "W007 "+row) || !strings.Contains(errs, "magic link") {
				t.Errorf("%q with [read] %s = %d, stdout %q, stderr %q; want 1, a W007 problem naming the row", args, row, code, out, errs)
			}
		}
	}
}

// TestRunRefusesMagicLinkGrant: [read] /proc/self/root granted the whole
// file system (the enforcer opened the magic link to /); now the run is
// refused (125) naming the row, and the file outside the grants is not
// read. /proc/self/cgroup, the command's own entry, still works.
func TestRunRefusesMagicLinkGrant(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	secret := filepath.Join(d, "secret")
	if err := os.WriteFile(secret, []byte("outside the grants\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	me := filepath.Join(d, "me")
	if err := os.Symlink("/proc/self", me); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"/proc/self/root", me + "/root", "/proc/self/cwd"} {
		cfg := filepath.Join(d, "p.cfg")
		if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n"+row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--config", cfg, "--", "cat", secret)
		cmd.Dir = d
		out, err := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if strings.Contains(string(out), "outside the grants") {
			t.Errorf("[read] %s: the command read %s through the magic link:\n%s", row, secret, out)
		}
		if code != 125 || !strings.Contains(string(out), row) || !strings.Contains(string(out), "magic link") {
			t.Errorf("[read] %s: run = %d (%v), output\n%s\nwant 125 naming the row and the magic link", row, code, err, out)
		}
	}
	cfg := filepath.Join(d, "own.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n/proc/self/cgroup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runBin(t, bin, nil, "run", "--config", cfg, "--", "cat", "/proc/self/cgroup"); code != 0 || !strings.Contains(out, "0::/") {
		t.Errorf("[read] /proc/self/cgroup: run = %d, %q, %q; want 0 and the command's cgroup", code, out, errs)
	}
}
