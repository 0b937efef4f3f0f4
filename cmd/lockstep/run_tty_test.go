package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"golang.org/x/sys/unix"
)

// tiocstiArg makes this test binary, started as `lockstep.test
// lockstep-test-tiocsti <line>`, the keystroke injector of
// TestRunNoTerminalInjection (an argument, not a variable: lockstep run
// scrubs the environment).
const tiocstiArg = "lockstep-test-tiocsti"

func init() {
	if len(os.Args) == 3 && os.Args[1] == tiocstiArg {
		os.Exit(tiocstiInjector(os.Args[2]))
	}
}

// tiocstiInjector pushes line into every terminal it can reach (fds 0, 1, 2
// and /dev/tty) with TIOCSTI, the request also with its high 32 bits set
// (the kernel ignores them; a filter must too), and TIOCLINUX's paste. It
// exits 0 if any byte went in, 3 if every attempt was refused.
func tiocstiInjector(line string) int {
	fds := []int{0, 1, 2}
	if fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY, 0); err == nil {
		fds = append(fds, fd)
	} else {
		fmt.Fprintf(os.Stderr, "injector: open /dev/tty: %v\n", err)
	}
	b := []byte(line)
	in := false
	for _, fd := range fds {
		for _, req := range []uint64{unix.TIOCSTI, 1<<32 | unix.TIOCSTI} {
			for i := range b {
				_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&b[i])))
				if e != 0 {
					fmt.Fprintf(os.Stderr, "injector: fd %d TIOCSTI %#x: %v\n", fd, req, e)
					break
				}
				in = true
			}
		}
		paste := []byte{3} // TIOCL_PASTESEL (linux/tiocl.h)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCLINUX, uintptr(unsafe.Pointer(&paste[0]))); e != unix.EPERM {
			fmt.Fprintf(os.Stderr, "injector: fd %d TIOCLINUX: %v, want EPERM\n", fd, e)
			in = true
		}
	}
	if in {
		return 0
	}
	return 3
}

// legacyTIOCSTI turns dev.tty.legacy_tiocsti on for the test (as on the
// machine the escape was found on), or skips saying why it cannot.
func legacyTIOCSTI(t *testing.T) {
	const knob = "/proc/sys/dev/tty/legacy_tiocsti"
	old, err := os.ReadFile(knob)
	featuretest.SkipIfNotSupported(t, featuretest.LegacyTIOCSTI, err)
	if err := os.WriteFile(knob, []byte("1"), 0); err != nil {
		t.Skipf("sysctl dev.tty.legacy_tiocsti=1 cannot be set (%v): run as root", err)
	}
	t.Cleanup(func() { _ = os.WriteFile(knob, old, 0) })
}

// openPTY opens a pseudo-terminal pair through /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	master = os.NewFile(uintptr(m), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// drain copies what the terminal shows until the master closes.
func drain(master *os.File) (shown func() string) {
	var mu sync.Mutex
	var b bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			b.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
}

// TestRunNoTerminalInjection: a command under lockstep run, started from a
// real terminal (a pty whose session lockstep leads, as a shell's job),
// pushes "touch <file>" into that terminal with TIOCSTI; then a shell
// reads the terminal, as the caller's shell would after lockstep ends.
// Nothing may have been injected and the file must not exist. Two set-ups:
// stdin is the terminal (the command stays in the session, foreground), and
// only stdout/stderr are (the command gets a session of its own). The
// policy grants /dev/tty read, write and ioctl, so Landlock alone stops
// nothing here. Run as root, TIOCSTI passes the kernel's own checks
// (CAP_SYS_ADMIN), whatever the session. The same with --exec (lockstep
// becomes the command): stdin the terminal; only stdout/stderr, lockstep a
// job of a job-control shell (a process group leader: it gives the
// terminal up with TIOCNOTTY, so /dev/tty opens nothing); and only
// stdout/stderr with lockstep leading the session, which is refused (125).
func TestRunNoTerminalInjection(t *testing.T) {
	legacyTIOCSTI(t)
	bin := lockstepbin.Build(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	cfg := filepath.Join(d, "p.cfg")
	rules := truePolicy + "[read]\n" + filepath.Dir(self) + "\n/dev/tty\n[execute]\n" + filepath.Dir(self) +
		"\n[write]\n/dev/tty\n[ioctl]\n/dev/tty\n"
	if err := os.WriteFile(cfg, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		stdinIsTTY bool
		limits     string
		flags      []string
		jobShell   bool // lockstep is a job of a job-control shell, not the session leader
		want       int  // lockstep's exit status: 3 the injector's, every TIOCSTI refused
	}{
		{"stdin-tty", true, "", nil, false, 3},
		{"stdout-tty", false, "", nil, false, 3},
		{"stdin-tty-reexec", true, "[limits]\nnofile=64\n", nil, false, 3},
		{"stdin-tty-exec", true, "", []string{"--exec"}, false, 3},
		{"stdout-tty-exec-job", false, "", []string{"--exec"}, true, 3},
		{"stdout-tty-exec-session-leader", false, "", []string{"--exec"}, false, cli.ExitRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcfg := filepath.Join(d, tc.name+".cfg")
			if err := os.WriteFile(pcfg, []byte(rules+tc.limits), 0o644); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "injected")
			master, slave := openPTY(t)
			shown := drain(master)
			argv := append(append([]string{bin, "run", "-q"}, tc.flags...), "--config", pcfg, "--", self, tiocstiArg, "touch "+marker+"\n")
			if !tc.stdinIsTTY {
				argv = append([]string{"sh", "-c", `exec "$@" </dev/null`, "sh"}, argv...)
			}
			if tc.jobShell {
				argv[2] = `set -m; "$@" </dev/null; exit $?`
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			// lockstep leads the terminal's session, as a shell's job.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 1}
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			// The caller's shell reads what is in the terminal now.
			sh := exec.Command("/bin/sh")
			sh.Stdin, sh.Stdout, sh.Stderr = slave, io.Discard, io.Discard
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := master.Write([]byte("exit\n")); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- sh.Wait() }()
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				sh.Process.Kill()
				t.Fatal("the shell reading the terminal did not end")
			}
			if _, err := os.Stat(marker); err == nil || code != tc.want {
				t.Errorf("lockstep run of the injector = %d (want %d); %s exists: %v\nterminal:\n%s",
					code, tc.want, marker, err == nil, strings.ReplaceAll(shown(), "\r", ""))
			}
			if !tc.stdinIsTTY && tc.want == 3 && !strings.Contains(shown(), "injector: open /dev/tty:") {
				t.Errorf("the injector opened /dev/tty: the command kept lockstep's controlling terminal\nterminal:\n%s",
					strings.ReplaceAll(shown(), "\r", ""))
			}
		})
	}
}
