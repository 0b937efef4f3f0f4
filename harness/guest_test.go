package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/version"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// privateTmp is this test process's TMPDIR: every guest temp dir lands
// there, so leaks are found without confusing other processes' guests.
var privateTmp string

// TestMain makes the test binary its own guest init (as lmb/vimto does):
// the code under test is the code that runs as PID 1. On the host it runs
// the tests and then fails the package if a QEMU process or a temp dir of
// ours survived.
func TestMain(m *testing.M) {
	// PID 1 started as /init is the guest (a container's PID 1 is not).
	if os.Getpid() == 1 && os.Args[0] == "/init" {
		guest.Main()
	}
	dir, err := os.MkdirTemp("", "lockstep-harness-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	privateTmp = dir
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	if procs := qemuProcesses(dir); len(procs) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: QEMU processes survived the tests: %v\n", procs)
		code = 1
	}
	if left := leftovers(dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: temp files survived the tests: %v\n", left)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// qemuProcesses lists the pids of QEMU processes whose command line
// mentions marker.
func qemuProcesses(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := string(bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))
		if strings.Contains(s, "qemu-system") && strings.Contains(s, marker) {
			out = append(out, e.Name()+": "+s[:min(len(s), 120)])
		}
	}
	return out
}

// leftovers lists what is left in dir, ignoring the per-test dirs the
// testing package removes itself.
func leftovers(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// needGuest skips only when QEMU is absent; a kernel that cannot be had
// fails the test.
func needGuest(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath(qemuBinary("")); err != nil {
		t.Skipf("no %s on PATH: guest tests need QEMU", qemuBinary(""))
	}
	bz, err := guesttest.PinnedKernel()
	if err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	return bz
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// opts returns options for a guest run under TCG (auto is tested on its
// own) with the command's output captured.
func opts(t *testing.T, bz string, cmd ...string) (Options, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	o := Options{
		Kernel: bz, Accel: AccelTCG, Command: cmd, Stdout: &stdout, Stderr: &stderr, Log: testLog(t),
		BootTimeout: 60 * time.Second, ShutdownTimeout: 60 * time.Second, Timeout: 3 * time.Minute,
	}
	return o, &stdout, &stderr
}

func checkNoQEMU(t *testing.T) {
	t.Helper()
	if procs := qemuProcesses(privateTmp); len(procs) > 0 {
		t.Errorf("QEMU still running after Run returned: %v", procs)
	}
	if left := leftovers(privateTmp); len(left) > 0 {
		for _, l := range left {
			if strings.HasPrefix(l, "lockstep-guest-") || strings.HasPrefix(l, "lockstep-kvmprobe-") {
				t.Errorf("temp dir %s survived Run", l)
			}
		}
	}
}

// TestGuestFacts boots once and checks what a command sees in the guest.
func TestGuestFacts(t *testing.T) {
	bz := needGuest(t)
	share := t.TempDir()
	os.WriteFile(filepath.Join(share, "input.txt"), []byte("shared input\n"), 0o644)
	results := t.TempDir()
	script := strings.Join([]string{
		`set -u`,
		`cat /etc/os-release`,
		`echo x > /etc/lockstep-canary && echo "canary=$(cat /etc/lockstep-canary)"`,
		`echo "guest=$LOCKSTEP_GUEST"`,
		`echo "lo=$(cat /sys/class/net/lo/flags)"`,
		`test -x /run/lockstep/lockstep && echo self=ok`,
		`echo "share=$(cat /run/lockstep/share/0/input.txt)"`,
		`echo "lsm=$(cat /sys/kernel/security/lsm)"`,
		`test -c /dev/null && test -L /dev/fd && test -d /dev/pts && echo dev=ok`,
		`echo "pwd=$(pwd)"`,
		`mkdir -p /run/lockstep/results/sub && echo result > /run/lockstep/results/sub/r.txt`,
		`echo to-stderr >&2`,
		`exit 7`,
	}, "\n")
	o, stdout, stderr := opts(t, bz, "/bin/sh", "-c", script)
	o.Shares = []Share{{Source: share}}
	o.ResultsDir = results
	o.Dir = "/etc"
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v\nconsole:\n%s", err, strings.Join(resTail(res), "\n"))
	}
	t.Logf("timings %+v, kernel %s, accel %s", res.Timings, res.KernelRelease, res.Accel)
	if res.Status != 7 {
		t.Errorf("status = %d, want 7", res.Status)
	}
	host, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	if !strings.HasPrefix(out, string(host)) {
		t.Errorf("guest /etc/os-release differs from the host's:\n%s", out)
	}
	for _, want := range []string{"canary=x\n", "guest=1\n", "lo=0x9\n", "self=ok\n", "share=shared input\n", "dev=ok\n", "pwd=/etc\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("guest output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "lsm=") || !strings.Contains(out, "landlock") {
		t.Errorf("landlock not in the guest's LSM list:\n%s", out)
	}
	if _, err := os.Stat("/etc/lockstep-canary"); err == nil {
		t.Error("the guest's write to /etc/lockstep-canary reached the host")
	}
	if stderr.String() != "to-stderr\n" {
		t.Errorf("stderr = %q, want %q", stderr.String(), "to-stderr\n")
	}
	if b, err := os.ReadFile(filepath.Join(results, "sub", "r.txt")); err != nil || string(b) != "result\n" {
		t.Errorf("results/sub/r.txt = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(results, "run.json")); err != nil || !bytes.Contains(b, []byte(`"accel": "tcg"`)) ||
		!bytes.Contains(b, []byte(`"lockstep": "`+version.String()+`"`)) {
		t.Errorf("run.json = %s, %v; want accel tcg and lockstep %s", b, err, version.String())
	}
	if !strings.HasPrefix(res.KernelRelease, kernel.DefaultPin) {
		t.Errorf("guest kernel release %q, want %s…", res.KernelRelease, kernel.DefaultPin)
	}
	checkNoQEMU(t)
}

func resTail(res *Result) []string {
	if res == nil {
		return nil
	}
	return res.ConsoleTail
}

// TestGuestLargeOutput streams 10 MB of random bytes and checks them
// against the guest's own checksum.
func TestGuestLargeOutput(t *testing.T) {
	bz := needGuest(t)
	o, stdout, stderr := opts(t, bz, "/bin/sh", "-c",
		`head -c 10485760 /dev/urandom > /tmp/blob && sha256sum /tmp/blob | cut -d' ' -f1 >&2 && cat /tmp/blob`)
	o.MemMB = 256
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, strings.Join(resTail(res), "\n"))
	}
	if stdout.Len() != 10<<20 {
		t.Fatalf("received %d bytes, want %d", stdout.Len(), 10<<20)
	}
	sum := sha256.Sum256(stdout.Bytes())
	if got, want := hex.EncodeToString(sum[:]), strings.TrimSpace(stderr.String()); got != want {
		t.Errorf("host sha256 %s, guest sha256 %s", got, want)
	}
	t.Logf("10 MB in %v (job phase), %d events", res.Timings.Job, res.Events)
	checkNoQEMU(t)
}

// slowWriter stands for a host that is busy elsewhere: each write waits
// before it lands.
type slowWriter struct {
	bytes.Buffer
	delay time.Duration
}

func (w *slowWriter) Write(b []byte) (int, error) {
	time.Sleep(w.delay)
	return w.Buffer.Write(b)
}

// TestGuestSlowHostReader reads the events channel slowly, as a loaded CI
// machine does, so that the guest's last events are still queued in the
// virtio port when its command ends. PID 1 must not reboot before the host
// has read the done event: QEMU drops what it has not yet written to the
// socket when the guest goes (the event stream then ends mid-line:
// "event N: decode …: unexpected end of JSON input").
func TestGuestSlowHostReader(t *testing.T) {
	bz := needGuest(t)
	o, _, _ := opts(t, bz, "/bin/sh", "-c", `head -c 2097152 /dev/zero`)
	out := &slowWriter{delay: 30 * time.Millisecond}
	o.Stdout = out
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, strings.Join(resTail(res), "\n"))
	}
	if out.Len() != 2<<20 {
		t.Fatalf("received %d bytes, want %d", out.Len(), 2<<20)
	}
	t.Logf("2 MB in %v (job phase), %d events", res.Timings.Job, res.Events)
	checkNoQEMU(t)
}

// TestGuestFailures boots guests that misbehave on purpose and checks that
// none is reported as anything but indeterminate or a setup failure.
func TestGuestFailures(t *testing.T) {
	bz := needGuest(t)
	for _, tc := range []struct {
		Name      string
		Hook      string
		Boot, Job time.Duration
		Status    int
		Err       error
		Forensics bool
		Reason    string
	}{
		{"hang before the first event", proto.HookHangBoot, 20 * time.Second, time.Minute, 3, ErrIndeterminate, true, "boot phase passed"},
		{"hang before the job", proto.HookHangJob, time.Minute, 5 * time.Second, 3, ErrIndeterminate, true, "job phase passed"},
		{"PID 1 exits: kernel panic", proto.HookPanic, time.Minute, time.Minute, 3, ErrIndeterminate, false, "no LOCKSTEP-STATUS"},
		{"setup failure", proto.HookSetupFail, time.Minute, time.Minute, 70, ErrGuestSetup, false, "test hook setup-fail"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			o, _, _ := opts(t, bz, "true")
			o.TestHook = tc.Hook
			o.BootTimeout, o.Timeout = tc.Boot, tc.Job
			o.ResultsDir = t.TempDir()
			start := time.Now()
			res, err := Run(t.Context(), o)
			if res == nil {
				t.Fatalf("Run returned no result: %v", err)
			}
			t.Logf("%v after %v: %v", res.Status, time.Since(start), err)
			if res.Status != tc.Status || !errors.Is(err, tc.Err) {
				t.Errorf("Run = status %d, %v; want %d, %v", res.Status, err, tc.Status, tc.Err)
			}
			if !strings.Contains(res.Reason, tc.Reason) {
				t.Errorf("reason %q lacks %q", res.Reason, tc.Reason)
			}
			if tc.Forensics {
				b, err := os.ReadFile(filepath.Join(o.ResultsDir, ForensicsFile))
				if err != nil || res.ForensicsFile == "" {
					t.Fatalf("no forensics saved: %v", err)
				}
				for _, want := range []string{"query-status: running", "info registers -a:", "RIP=", "console, last"} {
					if !bytes.Contains(b, []byte(want)) {
						t.Errorf("forensics lacks %q:\n%s", want, b)
					}
				}
			}
			checkNoQEMU(t)
		})
	}
}

// TestGuestTwoAtOnce runs two guests at once through a pool on this
// (2-core) machine.
func TestGuestTwoAtOnce(t *testing.T) {
	bz := needGuest(t)
	var all []Options
	var outs []*bytes.Buffer
	for i := range 2 {
		o, stdout, _ := opts(t, bz, "/bin/sh", "-c", fmt.Sprintf("echo guest-%d; cat /proc/cpuinfo > /dev/null", i))
		all = append(all, o)
		outs = append(outs, stdout)
	}
	p := NewPool(2)
	results, errs := p.RunAll(t.Context(), all)
	for i := range all {
		if errs[i] != nil {
			t.Errorf("guest %d: %v\n%s", i, errs[i], strings.Join(resTail(results[i]), "\n"))
			continue
		}
		if results[i].Status != 0 || outs[i].String() != fmt.Sprintf("guest-%d\n", i) {
			t.Errorf("guest %d: status %d, output %q", i, results[i].Status, outs[i].String())
		}
		t.Logf("guest %d: %+v", i, results[i].Timings)
	}
	checkNoQEMU(t)
}

// TestGuestRootWithoutStrace boots a root that lacks strace: the host's
// strace and its libraries come in through the initramfs.
func TestGuestRootWithoutStrace(t *testing.T) {
	bz := needGuest(t)
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("no strace on this host to carry into the guest")
	}
	root := t.TempDir()
	o, stdout, stderr := opts(t, bz, "/usr/bin/strace", "-V")
	o.Root = root
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, strings.Join(resTail(res), "\n"))
	}
	if res.Status != 0 || !strings.Contains(stdout.String(), "strace -- version") {
		t.Errorf("strace -V in a bare root: status %d, stdout %q, stderr %q", res.Status, stdout, stderr)
	}
	checkNoQEMU(t)
}

// TestGuestCommandNotFound: a missing command is 127, like a shell's.
func TestGuestCommandNotFound(t *testing.T) {
	bz := needGuest(t)
	o, _, stderr := opts(t, bz, "/no/such/command")
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != 127 || !strings.Contains(stderr.String(), "/no/such/command") {
		t.Errorf("status %d, stderr %q; want 127 naming the command", res.Status, stderr)
	}
	checkNoQEMU(t)
}

// TestGuestInterrupted cancels the context mid-boot, as SIGINT does.
func TestGuestInterrupted(t *testing.T) {
	bz := needGuest(t)
	ctx, cancel := context.WithCancel(t.Context())
	o, _, _ := opts(t, bz, "sleep", "60")
	time.AfterFunc(1500*time.Millisecond, cancel)
	res, err := Run(ctx, o)
	if res == nil || !errors.Is(err, context.Canceled) || res.Status != 3 {
		t.Fatalf("Run cancelled mid-boot = %+v, %v; want status 3 and context.Canceled", res, err)
	}
	checkNoQEMU(t)
}

// TestAccelProbe boots under KVM when /dev/kvm opens and checks the
// verdict is consistent and cached.
func TestAccelProbe(t *testing.T) {
	bz := needGuest(t)
	start := time.Now()
	v, err := ProbeAccel(t.Context(), bz, testLog(t))
	if err != nil {
		t.Fatalf("ProbeAccel: %v", err)
	}
	t.Logf("verdict after %v: %+v", time.Since(start), v)
	if ok, why := kvmOpenable(); !ok {
		if v.KVMUsable || v.Reason != why {
			t.Errorf("verdict %+v with /dev/kvm unopenable (%s)", v, why)
		}
		return
	}
	if v.KVMUsable == (v.Reason != "") {
		t.Errorf("verdict usable=%v with reason %q", v.KVMUsable, v.Reason)
	}
	// A KVM boot per CPU model, plus a TCG control boot when none booted.
	limit := BootDeadlines[AccelKVM]*time.Duration(len(KVMCPUModels)) + BootDeadlines[AccelTCG] + 30*time.Second
	if d := time.Since(start); d > limit {
		t.Errorf("probe took %v, want at most %v", d, limit)
	}
	cached, ok, err := CachedAccel()
	if err != nil || !ok || cached.KVMUsable != v.KVMUsable || cached.Reason != v.Reason {
		t.Errorf("CachedAccel() = %+v, %v, %v; want the probe's verdict", cached, ok, err)
	}
	// auto follows the verdict, kvm fails fast when unusable.
	o, _, _ := opts(t, bz, "true")
	o.Accel = AccelKVM
	if !v.KVMUsable {
		start := time.Now()
		if _, err := Run(t.Context(), o); !errors.Is(err, ErrKVMUnusable) {
			t.Errorf("Run with accel kvm on an unusable KVM = %v, want ErrKVMUnusable", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("accel kvm took %v to fail with a cached verdict", d)
		}
	}
	checkNoQEMU(t)
}

// TestGuestSetupDynamicInit: an init the guest cannot run (dynamically
// linked) stops Run before QEMU starts, as ErrGuestSetup (status 70).
func TestGuestSetupDynamicInit(t *testing.T) {
	bz := needGuest(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to stand for a dynamically linked init")
	}
	o, _, _ := opts(t, bz, "true")
	o.Init = sh
	_, err = Run(t.Context(), o)
	if !errors.Is(err, ErrGuestSetup) || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("Run with init %s = %v, want ErrGuestSetup naming a dynamically linked init", sh, err)
	}
	checkNoQEMU(t)
}

// TestGuestReapsOrphans: a process whose parent exits is reparented to the
// guest's PID 1, which reaps it when it exits. Unreaped, such zombies kept
// their Landlock domains alive, and the observer waited its whole bound
// for their deallocation records after a run stopped at its time limit.
func TestGuestReapsOrphans(t *testing.T) {
	bz := needGuest(t)
	script := `(sleep 0.3 &); sleep 3; cat /proc/[0-9]*/stat 2>/dev/null | grep -c '^[0-9]* ([^)]*) Z 1 ' || true`
	o, stdout, stderr := opts(t, bz, "/bin/bash", "-c", script)
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr)
	}
	if res.Status != 0 || strings.TrimSpace(stdout.String()) != "0" {
		t.Errorf("status %d, zombies of PID 1: %q (stderr %q); want 0", res.Status, stdout.String(), stderr)
	}
	checkNoQEMU(t)
}

// TestGuestPtmxIsTheDevice: the guest's /dev/ptmx is the character device
// 5:2, as on a host with devtmpfs (a pruned policy names it, and a link
// there made lockstep run refuse it), and opening it gives a pseudo-terminal
// from the devpts at /dev/pts.
func TestGuestPtmxIsTheDevice(t *testing.T) {
	bz := needGuest(t)
	script := `stat -c '%F %t:%T %a' /dev/ptmx; python3 -c 'import os; m, s = os.openpty(); print(os.ttyname(s).rsplit("/", 1)[0])'`
	o, stdout, stderr := opts(t, bz, "/bin/bash", "-c", script)
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr)
	}
	want := "character special file 5:2 666\n/dev/pts\n"
	if res.Status != 0 || stdout.String() != want {
		t.Errorf("status %d, stdout %q (stderr %q); want %q", res.Status, stdout.String(), stderr, want)
	}
	checkNoQEMU(t)
}
