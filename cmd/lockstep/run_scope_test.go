package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
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

// needPython is the system's python3, which the policies below grant
// under /usr (a pyenv shim elsewhere on PATH would not be).
func needPython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	return py
}

// TestRunCommandCannotReachLockstep: no thread of lockstep is in the
// command's Landlock domain, so the signal scope (ABI 6) keeps the command
// from signalling lockstep, or stopping it to outlive its timeout, and the
// ptrace scope from tracing it. The direct path once kept the thread that
// restricted itself and forked the command alive until the command ended:
// the command could SIGSTOP it (the whole of lockstep) or ptrace it.
func TestRunCommandCannotReachLockstep(t *testing.T) {
	featuretest.Require(t, featuretest.LandlockScope)
	py := needPython(t)
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

// cloneIntoCgroup starts a child with clone3(CLONE_INTO_CGROUP) in the
// cgroup2 directory argv[1] (opened O_PATH, which Landlock does not check)
// and prints the cgroup each process ends up in, or clone3's errno.
const cloneIntoCgroup = `
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)
args = struct.pack("<11Q", 0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)
pid = libc.syscall(435, ctypes.create_string_buffer(args, len(args)), len(args))
if pid == 0:
    os.write(1, b"child in " + open("/proc/self/cgroup", "rb").read().split(b"\n")[-2] + b"\n")
    os._exit(0)
if pid < 0:
    print("clone3 errno", ctypes.get_errno())
else:
    os.waitpid(pid, 0)
`

// TestRunCommandStaysInItsCgroup: a command run as root, granted nothing
// under /sys, cannot start a child outside its containment cgroup with
// clone3(CLONE_INTO_CGROUP): the seccomp filter answers clone3 with ENOSYS
// (C libraries fall back to clone). Before, the child landed in the root
// cgroup ("child in 0::/"), out of reach of the cgroup kill.
func TestRunCommandStaysInItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the escape needs root (DAC on the root cgroup)")
	}
	py := needPython(t)
	root := ""
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			root = d
			break
		}
	}
	if root == "" {
		t.Skip("no cgroup2 mount")
	}
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n/proc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-q", "--config", cfg, "--", py, "-S", "-c", cloneIntoCgroup, root).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "clone3 errno 38" {
		t.Errorf("clone3 into %s under lockstep run: %v\n%s\nwant clone3 refused with ENOSYS (38)", root, err, out)
	}
}

// rootPowers tries what a root command could do past its policy: raise
// the policy's nofile hard limit, and open a raw socket (which sends past
// the [connect] rules). It prints what each gave.
const rootPowers = `
import resource, socket
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 4, hard * 4))
    print("raised nofile to", resource.getrlimit(resource.RLIMIT_NOFILE)[1])
except (ValueError, OSError) as e:
    print("nofile stays", hard)
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    print("raw socket opened")
except OSError as e:
    print("raw socket refused")
`

// TestRunRootLosesCapabilities: a command run as root loses the
// capabilities that act past Landlock and the limits
// (enforcer.DroppedCapabilities): it cannot raise its nofile hard limit
// (CAP_SYS_RESOURCE) nor open a raw socket (CAP_NET_RAW). Before, the raw
// socket opened (and the limit rose where root has CAP_SYS_RESOURCE; the
// container this was written in had it out of its bounding set).
func TestRunRootLosesCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the capabilities are root's")
	}
	py := needPython(t)
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[limits]\nnofile=64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-q", "--config", cfg, "--", py, "-S", "-c", rootPowers).CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "nofile stays 64\nraw socket refused" {
		t.Errorf("root powers under lockstep run: %v\n%s\nwant nofile to stay 64 and the raw socket refused", err, out)
	}
}
