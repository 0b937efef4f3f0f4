//go:build linux

package audit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

const childEnv = "LOCKSTEP_AUDIT_TEST_CHILD"

// burstEnv, in the child's environment, repeats the refused open that many
// times: a burst of records to overflow a small backlog.
const burstEnv = "LOCKSTEP_AUDIT_TEST_BURST"

// forgeEnv, in the child's environment, is a barrier token it sends as an
// AUDIT_USER message, as a command with CAP_AUDIT_WRITE could.
const forgeEnv = "LOCKSTEP_AUDIT_TEST_FORGE"

func TestMain(m *testing.M) {
	if token := os.Getenv(forgeEnv); token != "" {
		if err := sendAuditUser(token); err != nil {
			fmt.Fprintln(os.Stderr, "forge:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if target := os.Getenv(childEnv); target != "" {
		os.Exit(refuseRead(target))
	}
	os.Exit(m.Run())
}

// refuseRead restricts this thread to a domain handling only READ_FILE and
// opens target for reading, which the kernel must refuse and log.
func refuseRead(target string) int {
	runtime.LockOSThread()
	fd, err := ll.LandlockCreateRuleset(&ll.RulesetAttr{HandledAccessFS: ll.AccessFSReadFile}, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "create ruleset:", err)
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "no_new_privs:", err)
		return 2
	}
	if err := ll.LandlockRestrictSelf(fd, ll.FlagRestrictSelfLogNewExecOn); err != nil {
		fmt.Fprintln(os.Stderr, "restrict:", err)
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv(burstEnv))
	for i := 0; i < max(n, 1); i++ {
		_, err = unix.Openat(unix.AT_FDCWD, target, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EACCES {
			fmt.Fprintf(os.Stderr, "open %s = %v, want EACCES\n", target, err)
			return 1
		}
	}
	return 0
}

// requireAudit skips only when the machine cannot do audit at all (not root,
// no NETLINK_AUDIT); Landlock below ABI 7 is a failure of this machine's
// promise (ABI 7 on every machine lockstep is tested on) and fails.
func requireAudit(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the audit collector needs root (CAP_AUDIT_CONTROL)")
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 7 {
		t.Fatalf("Landlock ABI = %d, %v; want >= 7 for audit records", abi, err)
	}
}

// TestCollectorRefusedRead is the collector on the host kernel: one refused
// read in a child gives exactly one accepted denial, joined to its SYSCALL
// record, closed by the domain's deallocation with denials=1.
func TestCollectorRefusedRead(t *testing.T) {
	requireAudit(t)
	var raw strings.Builder
	rawW := &syncWriter{b: &raw}
	c, err := Start(Options{Raw: rawW})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}()
	st, err := c.Status()
	if err != nil || st.Enabled == 0 || st.BacklogLimit != DefaultBacklogLimit || st.RateLimit != 0 || int(st.PID) != os.Getpid() {
		t.Fatalf("Status() = %+v, %v; want enabled, backlog %d, rate 0, pid %d", st, err, DefaultBacklogLimit, os.Getpid())
	}
	dir := t.TempDir()
	target, _ := filepath.EvalSymlinks(dir)
	target = filepath.Join(target, "secret")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ino uint64
	if fi, err := os.Stat(target); err == nil {
		ino = fi.Sys().(*syscall.Stat_t).Ino
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	run, err := c.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin() = %v", err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+target)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	pid := cmd.Process.Pid
	res, err := run.End(ctx, func(p int) bool { return p == pid }, 10*time.Second)
	if err != nil {
		t.Fatalf("End() = %v", err)
	}
	if res.Indeterminate() {
		t.Fatalf("End() problems: %q\nraw:\n%s", res.Problems, raw.String())
	}
	ds := res.Denials()
	if len(res.Domains) != 1 || len(ds) != 1 {
		t.Fatalf("End() = %d domains, %d denials; want 1 and 1\nraw:\n%s", len(res.Domains), len(ds), raw.String())
	}
	d := ds[0]
	if d.Access.Path != target || d.Access.Ino != ino || !d.Access.HasBlocker("fs.read_file") || len(d.Access.Blockers) != 1 {
		t.Errorf("denial = %+v, want fs.read_file on %s ino %d", d.Access, target, ino)
	}
	if d.Syscall == nil || d.Syscall.Pid != pid || d.Syscall.Nr != unix.SYS_OPENAT || d.Syscall.Exit != -int64(unix.EACCES) {
		t.Errorf("syscall = %+v, want pid %d openat exit -13", d.Syscall, pid)
	}
	if dl := res.Domains[0]; dl.Deallocated == nil || dl.Deallocated.Denials != 1 || dl.Allocated.Pid != pid {
		t.Errorf("domain = %+v, want allocated pid %d and deallocated denials=1", dl, pid)
	}
	// The owner predicate is what accepts a domain: a stranger's pid accepts none.
	if foreign := Assemble(res.Records, func(int) bool { return false }); len(foreign.Domains) != 0 || foreign.Foreign != 1 {
		t.Errorf("Assemble with no owned pid = %d domains, %d foreign; want 0 and 1", len(foreign.Domains), foreign.Foreign)
	}
}

// TestCollectorMissingBarrier: a run that owns a domain whose deallocation
// cannot arrive (the process is still alive) is indeterminate after the wait.
func TestCollectorMissingBarrier(t *testing.T) {
	requireAudit(t)
	c, err := Start(Options{})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	run, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Inject an allocated record for this process, as if it had created a
	// domain: its deallocation never comes while the test runs.
	rec, err := ParseNetlink(1424, []byte(fmt.Sprintf("audit(1.000:1): domain=ffffffffff status=allocated mode=enforcing pid=%d uid=0 exe=\"/x\" comm=\"x\"", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	c.dispatch(rec)
	start := time.Now()
	res, err := run.End(ctx, func(p int) bool { return p == os.Getpid() }, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Indeterminate() || len(res.Pending) != 1 || time.Since(start) < 300*time.Millisecond {
		t.Errorf("End() = problems %q pending %v after %v; want indeterminate after the 300ms wait", res.Problems, res.Pending, time.Since(start))
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestCollectorSlotHandover: a second collector waits while the first holds
// the unicast slot, takes it when the first closes, and keeps its settings
// (the first restores its own before letting the slot go).
func TestCollectorSlotHandover(t *testing.T) {
	requireAudit(t)
	a, err := Start(Options{})
	if err != nil {
		t.Fatalf("Start(a) = %v", err)
	}
	type started struct {
		c   *Collector
		err error
	}
	got := make(chan started, 1)
	go func() {
		c, err := Start(Options{SlotWait: 20 * time.Second})
		got <- started{c, err}
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case s := <-got:
		t.Fatalf("Start(b) returned (%v) while a held the slot", s.err)
	default:
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close(a) = %v", err)
	}
	s := <-got
	if s.err != nil {
		t.Fatalf("Start(b) after a closed = %v", s.err)
	}
	defer s.c.Close()
	st, err := s.c.Status()
	if err != nil || st.Enabled == 0 || st.BacklogLimit != DefaultBacklogLimit || int(st.PID) != os.Getpid() {
		t.Errorf("b's status = %+v, %v; want enabled, backlog %d, registered", st, err, DefaultBacklogLimit)
	}
	// And b still collects: a barrier round-trips.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.c.Barrier(ctx); err != nil {
		t.Errorf("Barrier(b) = %v", err)
	}
}

// TestCaptureLoss writes the capture in testdata/audit/loss-host: a run
// whose burst of refusals overflows a 16-record backlog, so the kernel
// drops records (and counts them), and every record the collector read.
// It runs only when LOCKSTEP_AUDIT_LOSS_CAPTURE names the directory to
// write; reassemble_test.go reads what it wrote.
func TestCaptureLoss(t *testing.T) {
	dir := os.Getenv("LOCKSTEP_AUDIT_LOSS_CAPTURE")
	if dir == "" {
		t.Skip("LOCKSTEP_AUDIT_LOSS_CAPTURE is not set: this test only writes a capture")
	}
	requireAudit(t)
	var raw strings.Builder
	c, err := Start(Options{BacklogLimit: 16, DropWhenFull: true, Raw: &syncWriter{b: &raw}})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer c.Close()
	target := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	run, err := c.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin() = %v", err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+target, burstEnv+"=400")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	pid := cmd.Process.Pid
	res, err := run.End(ctx, func(p int) bool { return p == pid }, 10*time.Second)
	if err != nil {
		t.Fatalf("End() = %v", err)
	}
	summary := fmt.Sprintf("pid=%d kernel_lost_before=%d kernel_lost_after=%d\n", pid, res.LostBefore, res.LostAfter)
	for _, p := range res.Problems {
		summary += "problem: " + p + "\n"
	}
	t.Log(summary)
	if err := os.WriteFile(filepath.Join(dir, "netlink.txt"), []byte(raw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.txt"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorIdleSleeps: a collector with no records to read does not
// wake. It used to poll its socket every 2 ms (500 wake-ups a second),
// which under TCG took the guest's CPU from the exercise runs beside it.
// The whole process's voluntary context switches over a quiet second are
// counted, and a record still arrives after the quiet (a barrier).
func TestCollectorIdleSleeps(t *testing.T) {
	requireAudit(t)
	c, err := Start(Options{})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer c.Close()
	time.Sleep(200 * time.Millisecond) // Start's own replies settle
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
		t.Fatal(err)
	}
	if n := after.Nvcsw - before.Nvcsw; n > 100 {
		t.Errorf("%d voluntary context switches in a quiet second with the collector running; want at most 100 (the 2 ms poll it replaced made about 1700 here)", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Barrier(ctx); err != nil {
		t.Errorf("Barrier after the quiet second = %v", err)
	}
}

// sendAuditUser sends text as an AUDIT_USER message on a netlink audit
// socket of its own and waits for the kernel's ack.
func sendAuditUser(text string) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	body := append([]byte(text), 0)
	msg := make([]byte, unix.NLMSG_HDRLEN+len(body))
	*(*unix.NlMsghdr)(unsafe.Pointer(&msg[0])) = unix.NlMsghdr{Len: uint32(len(msg)), Type: typeUser, Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK, Seq: 1}
	copy(msg[unix.NLMSG_HDRLEN:], body)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n < unix.NLMSG_HDRLEN+4 {
		return fmt.Errorf("short ack (%d bytes)", n)
	}
	if e := *(*int32)(unsafe.Pointer(&buf[unix.NLMSG_HDRLEN])); e != 0 {
		return unix.Errno(-e)
	}
	return nil
}

// TestCollectorIgnoresForgedBarrier: a barrier token sent by another
// process (as a command run as root with CAP_AUDIT_WRITE could) is not
// taken for the collector's own, so it can neither answer a later Barrier
// before that Barrier's message is back nor pile up in the collector. On
// the code that did not check the sender, the forged token was recorded.
func TestCollectorIgnoresForgedBarrier(t *testing.T) {
	requireAudit(t)
	c, err := Start(Options{})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer c.Close()
	c.mu.Lock()
	forged := barrierPrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(c.nbar+2, 10)
	c.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), forgeEnv+"="+forged)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the forging child: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// This barrier's own message is queued after the forged one: once it
	// is back, the forged one has been read.
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	taken := c.barriers[forged]
	c.mu.Unlock()
	if taken {
		t.Errorf("the collector took %q, sent by pid %d, for its own barrier", forged, cmd.Process.Pid)
	}
	// Its own next barrier still round-trips.
	if err := c.Barrier(ctx); err != nil {
		t.Errorf("Barrier after the forgery = %v", err)
	}
}
