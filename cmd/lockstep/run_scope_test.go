package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// signalParent counts the threads of the command's parent (lockstep) that
// the command may signal: tgkill(ppid, tid, 0) over the tids from the
// parent's pid on (Go's threads are numbered just after it).
const signalParent = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
p = os.getppid()
print("signalable", sum(1 for t in range(p, p + 4096) if libc.syscall(234, p, t, 0) == 0))
`

// TestRunCommandCannotReachLockstep: no thread of lockstep is in the
// command's Landlock domain, so the signal scope (ABI 6) keeps the command
// from signalling lockstep, or stopping it to outlive its timeout, and the
// ptrace scope from tracing it. The direct path once kept the thread that
// restricted itself and forked the command alive until the command ended:
// the command could SIGSTOP it (the whole of lockstep) or ptrace it.
func TestRunCommandCannotReachLockstep(t *testing.T) {
	if abi, err := enforcer.HostABI(); err != nil || abi < 6 {
		t.Skipf("no Landlock signal scope here (ABI %d, %v)", abi, err)
	}
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	for _, path := range []string{"direct", "limits"} {
		policy := truePolicy
		if path == "limits" {
			policy += "[limits]\nnofile=64\n"
		}
		cfg := filepath.Join(d, path+".cfg")
		if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "run", "-q", "--config", cfg, "--", py, "-S", "-c", signalParent).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "signalable ") {
			t.Fatalf("%s: lockstep run: %v\n%s", path, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "signalable 0" {
			t.Errorf("%s path: the command could signal %s thread(s) of lockstep; want none", path, strings.TrimPrefix(got, "signalable "))
		}
	}
}
