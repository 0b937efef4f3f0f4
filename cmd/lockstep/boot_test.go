package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/kernel"
)

// lockstepBinary builds this command statically into dir, as users run it
// (the Go build cache makes every build after the first a link).
func lockstepBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "lockstep")
	return bin, lockstepbin.BuildTo(bin)
}

// bootEnv returns what a boot test needs: the binary, the kernel and a
// private TMPDIR (so leaks are ours to find); it skips only without QEMU.
func bootEnv(t *testing.T) (bin, bz, tmp string) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: boot tests need QEMU")
	}
	bin, err := lockstepBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bz, err = kernel.Path(t.Context(), kernel.DefaultPin, nil)
	if err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	return bin, bz, t.TempDir()
}

func bootCmd(ctx context.Context, bin, tmp string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"boot"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// qemuWith lists QEMU processes whose command line mentions marker.
func qemuWith(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cl, []byte("qemu-system")) && bytes.Contains(cl, []byte(marker)) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestBootExitStatus(t *testing.T) {
	bin, bz, tmp := bootEnv(t)
	cmd, _, stderr := bootCmd(t.Context(), bin, tmp, "--kernel", bz, "--accel", "tcg", "--", "/bin/sh", "-c", "exit 7")
	err := cmd.Run()
	if got := exitCode(err); got != 7 {
		t.Errorf("lockstep boot -- sh -c 'exit 7' exited %d, want 7; stderr:\n%s", got, stderr)
	}
}

func TestBootOSRelease(t *testing.T) {
	bin, _, tmp := bootEnv(t)
	// The pin (not a file) and accel auto: the CLI as users run it.
	cmd, stdout, stderr := bootCmd(t.Context(), bin, tmp, "--", "cat", "/etc/os-release")
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockstep boot -- cat /etc/os-release: %v\n%s", err, stderr)
	}
	host, _ := os.ReadFile("/etc/os-release")
	if stdout.String() != string(host) {
		t.Errorf("guest printed %q, want the host's %q", stdout, host)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temp files left behind: %v", ents)
	}
}

// TestBootSIGINT interrupts lockstep boot while the guest boots: no QEMU
// and no temp dir may survive, and the status is 3.
func TestBootSIGINT(t *testing.T) {
	bin, bz, tmp := bootEnv(t)
	cmd, _, stderr := bootCmd(t.Context(), bin, tmp, "--kernel", bz, "--accel", "tcg", "--", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(qemuWith(tmp)) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no QEMU appeared in 60 s; stderr:\n%s", stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // mid-boot
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if got := exitCode(err); got != 3 {
			t.Errorf("lockstep boot after SIGINT exited %d, want 3; stderr:\n%s", got, stderr)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("lockstep boot did not exit within 30 s of SIGINT")
	}
	if procs := qemuWith(tmp); len(procs) > 0 {
		t.Errorf("QEMU survived SIGINT: pids %v", procs)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("temp dirs survived SIGINT: %s", strings.Join(names, ", "))
	}
}

// TestBootSetupExits holds boot to its --help: a kernel or a QEMU that
// cannot be had is 1, a guest that cannot be set up (modules missing, an
// init the guest cannot run) is 70, never 3 (which says a guest ran and did
// not report); a bad flag value is 2, naming the flag and its value.
func TestBootSetupExits(t *testing.T) {
	dir := t.TempDir()
	bz := filepath.Join(dir, "bzImage")
	if err := os.WriteFile(bz, []byte("not booted: setup fails first"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"NoKernelFile", []string{"boot", "--kernel", filepath.Join(dir, "none", "bzImage"), "--", "true"}, cli.ExitFail, "not found"},
		{"NoModules", []string{"boot", "--kernel", bz, "--machine", "q35", "--modules", filepath.Join(dir, "none"), "--", "true"}, cli.ExitGuestSetup, "none"},
		{"NoQEMU", []string{"boot", "--kernel", bz, "--accel", "tcg", "--", "true"}, cli.ExitFail, "no usable QEMU"},
		{"BadMem", []string{"boot", "--kernel", bz, "--mem", "32", "--", "true"}, cli.ExitUsage, "--mem 32: want at least 64"},
		{"BadBootTimeout", []string{"boot", "--kernel", bz, "--boot-timeout", "-1s", "--", "true"}, cli.ExitUsage, "--boot-timeout -1s: want a duration of 0 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "NoQEMU" {
				t.Setenv("LOCKSTEP_QEMU", filepath.Join(dir, "no-qemu"))
			}
			code, _, errb := runCLI(t, tc.args...)
			if code != tc.want || !strings.Contains(errb, tc.msg) {
				t.Errorf("lockstep %s = %d, %q; want %d naming %q", strings.Join(tc.args, " "), code, errb, tc.want, tc.msg)
			}
		})
	}
}

// TestRunGuestProcessCaps runs `lockstep run` in a guest, where the process
// cap is a v2 cgroup's pids.max and the re-executed enforcer child is born
// in that cgroup: nproc=1 still starts the command (the child's Go runtime
// starts its threads before the cap is written, else "failed to create new
// OS thread" killed it), and nproc=3 refuses the fourth process.
func TestRunGuestProcessCaps(t *testing.T) {
	bin, bz, tmp := bootEnv(t)
	share := t.TempDir()
	for name, cfg := range map[string]string{
		"n1.cfg": "[read]\n/usr\n/etc/ld.so.cache\n[execute]\n/usr\n[limits]\nnproc=1\n",
		"n3.cfg": "[read]\n/usr\n/etc/ld.so.cache\n/dev/null\n[execute]\n/usr\n[limits]\nnproc=3\ntimeout=60\n",
	} {
		if err := os.WriteFile(filepath.Join(share, name), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := lockstepbin.BuildTo(filepath.Join(share, "lockstep")); err != nil {
		t.Fatal(err)
	}
	const script = `s=/run/lockstep/share/0
$s/lockstep run -q --config $s/n1.cfg -- /usr/bin/true; echo "n1 $?"
$s/lockstep run -q --config $s/n3.cfg -- /usr/bin/bash -c 'for i in 1 2 3 4 5; do /usr/bin/sleep 2 & done; wait'; echo "n3 $?"`
	cmd, stdout, stderr := bootCmd(t.Context(), bin, tmp, "--kernel", bz, "--accel", "tcg", "--share", share, "--", "/usr/bin/bash", "-c", script)
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockstep boot: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if got, want := stdout.String(), "n1 0\nn3 137\n"; got != want {
		t.Errorf("guest printed %q, want %q\nstderr:\n%s", got, want, stderr)
	}
	if !strings.Contains(stderr.String(), "process cap nproc=3 passed") {
		t.Errorf("stderr does not name the passed cap:\n%s", stderr)
	}
}

// TestBootScratchIsOwn: the guest's /tmp and /var/tmp are its own, not the
// host's under the overlay: a file the host has there is not in the guest.
// (/var/tmp holds the exercises' working directory; under the overlay a
// directory the guest emptied in place showed what host processes put in
// the host's, and a guest prune's run found the host's test-reports listed
// and then gone.)
func TestBootScratchIsOwn(t *testing.T) {
	bin, bz, tmp := bootEnv(t)
	var marks []string
	for _, dir := range []string{"/tmp", "/var/tmp"} {
		f, err := os.CreateTemp(dir, "lockstep-host-only-")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Cleanup(func() { os.Remove(f.Name()) })
		marks = append(marks, f.Name())
	}
	script := `for f in "$@"; do if [ -e "$f" ]; then echo "the guest sees the host's $f"; exit 1; fi; done; touch /var/tmp/x && rm /var/tmp/x`
	cmd, stdout, stderr := bootCmd(t.Context(), bin, tmp, append([]string{"--kernel", bz, "--accel", "tcg", "--", "/bin/sh", "-c", script, "sh"}, marks...)...)
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockstep boot: %v\n%s%s", err, stdout, stderr)
	}
}
