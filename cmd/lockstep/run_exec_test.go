package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// TestRunExec: `lockstep run --exec` becomes the command (the shell's $$ is
// the pid lockstep was started with), restricted as run restricts it (a
// granted file reads, an ungranted one is refused), with the rlimits of
// [limits]; a policy with a timeout or a cgroup cap, and an --expect-hash
// naming another policy, are refused (125) with nothing run, and a missing
// command is 127.
func TestRunExec(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	granted, secret := filepath.Join(d, "granted"), filepath.Join(d, "secret")
	for _, f := range []string{granted, secret} {
		if err := os.WriteFile(f, []byte("content of "+filepath.Base(f)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(d, "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n"+granted+"\n[limits]\nnofile=64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-q", "--exec", "--config", cfg, "--", "sh", "-c",
		`echo "pid $$"; cat "$0"; cat "$1" || echo refused; echo "nofile $(ulimit -n)"`, granted, secret)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockstep run --exec: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"pid " + strconv.Itoa(cmd.Process.Pid) + "\n", "content of granted\n", "refused\n", "nofile 64\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lockstep run --exec: stdout lacks %q:\n%s\nstderr:\n%s", want, out.String(), errb.String())
		}
	}
	if strings.Contains(out.String(), "content of secret") {
		t.Errorf("lockstep run --exec read the ungranted file:\n%s", out.String())
	}

	marker := filepath.Join(d, "ran")
	for _, limits := range []string{"timeout=5", "nproc=8", "mem_mb=512"} {
		lcfg := filepath.Join(d, "limits.cfg")
		if err := os.WriteFile(lcfg, []byte(truePolicy+"[write]\n"+d+"\n[limits]\n"+limits+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runBin(t, bin, nil, "run", "--exec", "--config", lcfg, "--", "touch", marker)
		if _, err := os.Stat(marker); err == nil || code != cli.ExitRefused || !strings.Contains(errs, "run without --exec") {
			t.Errorf("lockstep run --exec with [limits] %s = %d, ran: %v, want 125 and nothing run\n%s", limits, code, err == nil, errs)
		}
	}
	wcfg := filepath.Join(d, "write.cfg")
	if err := os.WriteFile(wcfg, []byte(truePolicy+"[write]\n"+d+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runBin(t, bin, nil, "run", "--exec", "--expect-hash", "sha256:00", "--config", wcfg, "--", "touch", marker)
	if _, err := os.Stat(marker); err == nil || code != cli.ExitRefused || !strings.Contains(errs, "policy hash mismatch") {
		t.Errorf("lockstep run --exec --expect-hash sha256:00 = %d, ran: %v, want 125 and nothing run\n%s", code, err == nil, errs)
	}
	if code, _, errs := runBin(t, bin, nil, "run", "-q", "--exec", "--config", cfg, "--", "lockstep-no-such-command"); code != 127 {
		t.Errorf("lockstep run --exec of a missing command = %d, want 127\n%s", code, errs)
	}
}
