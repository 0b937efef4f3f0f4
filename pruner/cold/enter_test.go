package cold

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain lets the test binary be the role, as lockstep and any program
// calling prune.ServeRoles are.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Verb {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// needMounts skips where this process cannot make a mount namespace.
func needMounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cold runs need root (CAP_SYS_ADMIN)")
	}
}

// coldRun runs script with bash through the role, in dir, keeping keep.
func coldRun(t *testing.T, stage, dir string, keep []string, script string) (string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(Command([]string{self}, stage, keep), "/bin/bash", "-euc", script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSecondRunIsCold: a first run writes files outside its working
// directory (/root/.cache, /var/tmp, /tmp, a system path under /usr/lib,
// /etc) and into it; the second run, and this process afterwards, see
// none of the outside files and all of the inside one.
func TestSecondRunIsCold(t *testing.T) {
	needMounts(t)
	tag := fmt.Sprintf("lockstep-cold-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	outside := []string{"/root/.cache/" + tag, "/var/tmp/" + tag, "/tmp/" + tag, "/usr/lib/" + tag, "/etc/" + tag}
	t.Cleanup(func() {
		for _, p := range outside {
			os.RemoveAll(p)
		}
	})
	work, stage := t.TempDir(), t.TempDir()
	write := "mkdir -p /root/.cache\n"
	for _, p := range outside {
		write += fmt.Sprintf("echo warm >%s && test -s %s\n", p, p)
	}
	write += "echo kept >inside\n"
	out, err := coldRun(t, stage, work, []string{work}, write)
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	check := "for f in " + strings.Join(outside, " ") + "; do if test -e $f; then echo \"sees $f\"; exit 1; fi; done; test \"$(cat inside)\" = kept"
	if out, err := coldRun(t, stage, work, []string{work}, check); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	for _, p := range outside {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists outside the run", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "inside")); err != nil || string(b) != "kept\n" {
		t.Errorf("the working directory's file after the run: %q, %v; want kept", b, err)
	}
	if entries, _ := os.ReadDir(stage); len(entries) != 0 {
		t.Errorf("the stage holds %d entries outside the run, want none (its tmpfs is the run's)", len(entries))
	}
}

// TestColdRunDropsSysAdmin: the command runs without CAP_SYS_ADMIN, in the
// same working directory, and cannot mount.
func TestColdRunDropsSysAdmin(t *testing.T) {
	needMounts(t)
	work := t.TempDir()
	out, err := coldRun(t, t.TempDir(), work, []string{work},
		"pwd; mount -t tmpfs none \"$PWD\" 2>/dev/null && echo mounted || echo refused; grep -E '^Cap(Bnd|Eff)' /proc/self/status")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || lines[0] != work {
		t.Fatalf("output %q, want the working directory %q first", out, work)
	}
	if lines[1] != "refused" {
		t.Errorf("a mount in the run: %q, want refused", lines[1])
	}
	for _, l := range lines[2:] {
		var mask uint64
		if _, err := fmt.Sscanf(strings.Fields(l)[1], "%x", &mask); err != nil {
			t.Fatal(err)
		}
		if mask&(1<<unix.CAP_SYS_ADMIN) != 0 {
			t.Errorf("%s: CAP_SYS_ADMIN is still there", l)
		}
	}
}

// TestColdRunRefusals: bad arguments are 2; a stage inside a keep path is
// refused before anything runs, with the status and the hint.
func TestColdRunRefusals(t *testing.T) {
	var b bytes.Buffer
	if st := Main([]string{"--stage", "/tmp/s"}, &b); st != 2 {
		t.Errorf("no command: status %d, want 2 (%s)", st, b.String())
	}
	needMounts(t)
	work := t.TempDir()
	out, err := coldRun(t, filepath.Join(work, "stage"), work, []string{work}, "echo ran")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != SetupStatus || strings.Contains(out, "ran") || !strings.Contains(out, "overlap") {
		t.Errorf("a stage inside the keep path: %v\n%s; want status %d, the overlap named, nothing run", err, out, SetupStatus)
	}
}
