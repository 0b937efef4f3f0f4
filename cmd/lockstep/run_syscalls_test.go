package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"golang.org/x/sys/unix"
)

// syscallProbeArg makes this test binary, started as `lockstep.test
// lockstep-test-syscall <probe> [arg]`, a command that tries one thing the
// seccomp filter or the dropped capabilities refuse and prints what the
// kernel answered (an argument, not a variable: lockstep run scrubs the
// environment).
const syscallProbeArg = "lockstep-test-syscall"

func init() {
	if len(os.Args) >= 3 && os.Args[1] == syscallProbeArg {
		os.Exit(syscallProbe(os.Args[2], os.Args[3:]))
	}
}

// errText is what a probe prints for a system call's result.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

func syscallProbe(probe string, args []string) int {
	switch probe {
	case "keyboard":
		return probeKeyboard()
	case "keyring":
		return probeKeyring(args[0])
	case "memfd":
		return probeMemfdExec(args[0], args[1])
	case "perf":
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
			Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		fmt.Println("perf_event_open", errText(err))
		if err == nil {
			unix.Close(fd)
		}
	case "audit":
		fmt.Println("audit_user", errText(sendAuditUser("lockstep-test-audit-write")))
	default:
		fmt.Fprintf(os.Stderr, "unknown probe %q\n", probe)
		return 2
	}
	return 0
}

// probeKeyboard tries to rebind a key (KDSKBENT) and a function key's
// string (KDSKBSENT) on stdin, and on /dev/tty0 where there is one.
func probeKeyboard() int {
	fds := map[string]int{"stdin": 0}
	if fd, err := unix.Open("/dev/tty0", unix.O_RDWR|unix.O_NOCTTY, 0); err == nil {
		fds["tty0"] = fd
	}
	for name, fd := range fds {
		entry := [4]byte{0, 30, 0x01, 0x0c}    // struct kbentry: K_NORMTAB, keycode 30 ('a'), K(KT_FN, F13)
		sentry := make([]byte, 1+512)          // struct kbsentry: F13's string
		copy(sentry, "\x0ctouch /tmp/owned\n") // kb_func 12
		for _, req := range []struct {
			name string
			nr   uintptr
			arg  unsafe.Pointer
		}{{"KDSKBENT", 0x4B47, unsafe.Pointer(&entry[0])}, {"KDSKBSENT", 0x4B49, unsafe.Pointer(&sentry[0])}} {
			_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req.nr, uintptr(req.arg))
			var err error
			if e != 0 {
				err = e
			}
			fmt.Println(name, req.name, errText(err))
		}
	}
	return 0
}

// probeKeyring searches the user keyring for the key desc, reads it, and
// plants a key of its own there.
func probeKeyring(desc string) int {
	ring, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0, 0, 0)
	fmt.Println("user keyring", errText(err))
	id, err := unix.KeyctlSearch(ring, "user", desc, 0)
	if err == nil {
		buf := make([]byte, 64)
		var n int
		n, err = unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err == nil {
			fmt.Printf("read %q\n", buf[:n])
		}
	}
	fmt.Println("search", errText(err))
	_, err = unix.AddKey("user", desc+"-planted", []byte("planted"), unix.KEY_SPEC_USER_KEYRING)
	fmt.Println("add_key", errText(err))
	return 0
}

// probeMemfdExec copies file into a memfd and executes it: by descriptor
// (execveat with AT_EMPTY_PATH, as fexecve does) or by its /proc/self/fd
// path. It returns only if the exec failed.
func probeMemfdExec(file, how string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Println("read", errText(err))
		return 3
	}
	fd, err := unix.MemfdCreate("payload", 0)
	if err != nil {
		fmt.Println("memfd_create", errText(err))
		return 3
	}
	if _, err := unix.Write(fd, b); err != nil {
		fmt.Println("write", errText(err))
		return 3
	}
	argv := []string{"payload"}
	switch how {
	case "execveat":
		argv0, _ := unix.BytePtrFromString(argv[0])
		vec := []*byte{argv0, nil}
		empty, _ := unix.BytePtrFromString("")
		_, _, e := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
			uintptr(unsafe.Pointer(&vec[0])), uintptr(unsafe.Pointer(&vec[1])), unix.AT_EMPTY_PATH, 0)
		err = e
	case "procfd":
		err = unix.Exec("/proc/self/fd/"+strconv.Itoa(fd), argv, nil)
	case "path":
		err = unix.Exec(file, argv, nil)
	}
	fmt.Println(how, errText(err))
	return 3
}

// sendAuditUser sends an AUDIT_USER message on a netlink audit socket and
// returns the kernel's answer (its ack).
func sendAuditUser(text string) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	body := append([]byte(text), 0)
	msg := make([]byte, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.AUDIT_USER)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	copy(msg[unix.NLMSG_HDRLEN:], body)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("receive the ack: %w", err)
	}
	if n < unix.NLMSG_HDRLEN+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("no ack (%d bytes)", n)
	}
	if e := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); e != 0 {
		return unix.Errno(-e)
	}
	return nil
}

// runProbe runs this test binary's probe under lockstep run with a policy
// that lets it execute itself, plus extra; it returns the output and exit
// status.
func runProbe(t *testing.T, stdin *os.File, extra string, probe ...string) (string, int) {
	t.Helper()
	bin := lockstepbin.Build(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	policy := truePolicy + "[read]\n" + filepath.Dir(self) + "\n[execute]\n" + filepath.Dir(self) + "\n" + extra
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"run", "-q", "--config", cfg, "--", self, syscallProbeArg}, probe...)...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()
}

// TestRunNoKeyboardRemap: a command cannot rebind a virtual console's keys
// (KDSKBENT) or a function key's string (KDSKBSENT), which would type a
// command outside the sandbox at the user's next keystroke. There is no
// virtual console here, so the ioctls go to a pty on stdin: refused with
// EPERM by the filter before the driver is reached (which answers ENOTTY;
// on the old code: "stdin KDSKBENT ENOTTY").
func TestRunNoKeyboardRemap(t *testing.T) {
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pty.Close()
	out, code := runProbe(t, pty, "", "keyboard")
	if code != 0 {
		t.Fatalf("probe exited %d:\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasSuffix(line, " EPERM") {
			t.Errorf("%s; want EPERM", line)
		}
	}
	if !strings.Contains(out, "stdin KDSKBENT") || !strings.Contains(out, "stdin KDSKBSENT") {
		t.Errorf("probe output lacks the stdin lines:\n%s", out)
	}
}

// TestRunNoKeyring: the keyrings are the host's, so a command run as the
// same user could read a key of the caller's user keyring and plant one
// that outlives it. keyctl and add_key are refused (on the old code the
// command read the key: `read "lockstep-secret"`).
func TestRunNoKeyring(t *testing.T) {
	desc := fmt.Sprintf("lockstep-test-%d", os.Getpid())
	id, err := unix.AddKey("user", desc, []byte("lockstep-secret"), unix.KEY_SPEC_USER_KEYRING)
	if err != nil {
		t.Skipf("cannot add a key to the user keyring here: %v", err)
	}
	t.Cleanup(func() {
		unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
		ring, _ := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0, 0, 0)
		if planted, err := unix.KeyctlSearch(ring, "user", desc+"-planted", 0); err == nil {
			unix.KeyctlInt(unix.KEYCTL_INVALIDATE, planted, 0, 0, 0)
			t.Errorf("the command planted key %d in the user keyring", planted)
		}
	})
	out, code := runProbe(t, nil, "", "keyring", desc)
	want := "user keyring EPERM\nsearch EPERM\nadd_key EPERM"
	if code != 0 || out != want {
		t.Errorf("keyring probe under lockstep run (exit %d):\n%s\nwant:\n%s", code, out, want)
	}
}

// TestRunNoMemfdExec: a policy without [execute] on a file keeps the command
// from running it, by path and by a copy of its bytes in a memfd executed
// by descriptor (execveat with AT_EMPTY_PATH, which Landlock does not
// check: on the old code the copy ran, exit 0).
func TestRunNoMemfdExec(t *testing.T) {
	d := t.TempDir()
	payload := filepath.Join(d, "payload")
	b, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(payload, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ how, want string }{
		{"path", "path EACCES"},
		{"execveat", "execveat ENOSYS"},
	} {
		out, code := runProbe(t, nil, "[read]\n"+d+"\n", "memfd", payload, tc.how)
		if code != 3 || out != tc.want {
			t.Errorf("%s: the probe exited %d (3: the exec failed, 0: the payload ran):\n%s\nwant %q", tc.how, code, out, tc.want)
		}
	}
	// What the seccomp layer cannot stop: the same memfd by its
	// /proc/self/fd path, a path Landlock does not check either. Only
	// vm.memfd_noexec=2 in the command's PID namespace refuses it.
	out, code := runProbe(t, nil, "[read]\n"+d+"\n", "memfd", payload, "procfd")
	t.Logf("memfd by /proc/self/fd path: exit %d %s (vm.memfd_noexec here: %s)", code, out, readTrim("/proc/sys/vm/memfd_noexec"))
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}

// TestRunNoPerfEvents: perf_event_open is refused (an event's sigtrap sends
// SIGTRAP round Landlock's signal scope; on the old code: "perf_event_open
// ok").
func TestRunNoPerfEvents(t *testing.T) {
	if out, code := runProbe(t, nil, "", "perf"); code != 0 || out != "perf_event_open EPERM" {
		t.Errorf("perf probe under lockstep run (exit %d): %s; want perf_event_open EPERM", code, out)
	}
}

// TestRunRootCannotRaisePriority: a command run as root loses CAP_SYS_NICE,
// so it cannot take a negative nice value (nor SCHED_FIFO) and starve the
// host; lowering its own priority still works. On the old code `nice -n
// -5 nice` printed -5.
func TestRunRootCannotRaisePriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: CAP_SYS_NICE is root's")
	}
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, want string }{{"-5", "0"}, {"5", "5"}} {
		cmd := exec.Command(bin, "run", "-q", "--config", cfg, "--", "nice", "-n", tc.n, "nice")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("nice -n %s nice under lockstep run: %v, printed %q (stderr %q); want %s", tc.n, err, out, stderr.String(), tc.want)
		}
	}
}

// TestRunRootCannotWriteAudit: a command run as root loses CAP_AUDIT_WRITE,
// so it cannot put user messages into the host's audit log (where the
// observer's collector reads its barrier tokens): the kernel refuses an
// AUDIT_USER message on a real netlink audit socket (on the old code:
// "audit_user ok").
func TestRunRootCannotWriteAudit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: CAP_AUDIT_WRITE is root's")
	}
	if err := sendAuditUser("lockstep-test-audit-write"); err != nil {
		t.Skipf("this process cannot send an audit user message either: %v", err)
	}
	if out, code := runProbe(t, nil, "", "audit"); code != 0 || out != "audit_user EPERM" {
		t.Errorf("audit probe under lockstep run (exit %d): %s; want audit_user EPERM", code, out)
	}
}

// TestRunNoLimitsOfOthers: a command cannot change the rlimits of a
// process outside the sandbox (Landlock has no hook for prlimit): `prlimit
// --pid P --nofile=7:7` on a sleep started by the test fails and leaves its
// limit as it was. On the old code the sleep's limit became 7.
func TestRunNoLimitsOfOthers(t *testing.T) {
	if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
		t.Skip("no /usr/bin/prlimit")
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	var before unix.Rlimit
	if err := unix.Prlimit(sleep.Process.Pid, unix.RLIMIT_NOFILE, nil, &before); err != nil {
		t.Fatal(err)
	}
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-q", "--config", cfg, "--", "prlimit", "--pid", strconv.Itoa(sleep.Process.Pid), "--nofile=7:7").CombinedOutput()
	var after unix.Rlimit
	if err := unix.Prlimit(sleep.Process.Pid, unix.RLIMIT_NOFILE, nil, &after); err != nil {
		t.Fatal(err)
	}
	if err == nil || after != before {
		t.Errorf("prlimit of an outside process under lockstep run: %v\n%s\nits nofile went from %v to %v; want the call refused and the limit kept", err, out, before, after)
	}
}
