package exercise

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/internal/proctest"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
)

// TestMain serves the isolated runs' role (refns.Verb) from this test
// binary, as lockstep does from its own.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == refns.Verb {
		os.Exit(refns.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// isolation is this test binary as the isolated runs' program, readOnly
// protected.
func isolation(t *testing.T, readOnly ...string) *Isolation {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("an isolated run maps every id into its user namespace: that takes root")
	}
	self, err := refns.OpenSelf()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { self.Close() })
	return &Isolation{Program: self, ReadOnly: readOnly}
}

// hostileReference is a build script that, run as root with no sandbox,
// tries to change what the program that started it relies on (GUARD, a
// directory it must see read-only; the system's programs and libraries,
// which the starter may run unsandboxed; the program itself: PARENT), to
// write a kernel tunable (the value it has, rewritten; also through a
// /proc of its own), and to outlive its
// run (a setsid daemon): each success prints a line starting with "HOLE".
const hostileReference = `
echo tamper >GUARD/file && echo "HOLE: wrote GUARD/file"
for d in /etc /usr/bin /usr/lib; do
  touch $d/lockstep-isolation-probe.TOKEN 2>/dev/null && rm -f $d/lockstep-isolation-probe.TOKEN && echo "HOLE: wrote $d"
done
mv GUARD/file GUARD/moved && echo "HOLE: renamed GUARD/file"
umount -l GUARD 2>/dev/null && echo "HOLE: unmounted GUARD"
mount -o remount,bind,rw GUARD 2>/dev/null && echo "HOLE: remounted GUARD read-write"
echo tamper >GUARD/file && echo "HOLE: wrote GUARD/file after umount/remount"
kill -0 PARENT && echo "HOLE: can signal the program that started the run (pid PARENT)"
[ -e /proc/PARENT/status ] && grep -q "^Tgid:\s*PARENT\$" /proc/PARENT/status && echo "HOLE: sees pid PARENT"
v=$(cat /proc/sys/kernel/printk | tr '\t' ' ') && echo "$v" >/proc/sys/kernel/printk && echo "HOLE: wrote /proc/sys/kernel/printk"
unshare --pid --fork --mount-proc sh -c "echo '$v' >/proc/sys/kernel/printk" 2>/dev/null && echo "HOLE: wrote /proc/sys/kernel/printk through a /proc of its own"
ls /dev | grep -qE '^(sd|vd|nvme|loop|mem$|kmsg$)' && echo "HOLE: /dev holds $(ls /dev | grep -E '^(sd|vd|nvme|loop|mem$|kmsg$)' | head -3)"
setsid sleep TOKEN </dev/null >/dev/null 2>&1 &
sleep 0.5 # the daemon is on its own by now
echo in-work >in-work
echo open >GUARD/open/file || echo "LOST: cannot write GUARD/open, writable below GUARD"
echo ran to the end
`

// TestIsolatedRunContainsHostileReference runs hostileReference as an
// isolated run: its working directory and GUARD/open (Writable) stay
// writable and its output reaches the runner, but GUARD is unchanged, no HOLE line is printed, and
// its setsid daemon is gone when Run returns.
func TestIsolatedRunContainsHostileReference(t *testing.T) {
	dir := t.TempDir()
	guard := filepath.Join(dir, "guard")
	if err := os.MkdirAll(guard, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(guard, "file"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(guard, "open"), 0o755); err != nil {
		t.Fatal(err)
	}
	token := strconv.Itoa(100000 + os.Getpid()%100000)
	script := strings.NewReplacer("GUARD", guard, "PARENT", strconv.Itoa(os.Getpid()), "TOKEN", token).Replace(hostileReference)
	e := scratch(t, script)
	work := filepath.Join(dir, "w")
	iso := isolation(t, guard)
	iso.Writable = []string{filepath.Join(guard, "open")}
	res, err := e.Run(t.Context(), RunOptions{WorkDir: work, Isolate: iso})
	daemons := proctest.KillSleeping(t, token)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || res.Status != 0 || !strings.Contains(string(res.Stdout), "ran to the end") {
		t.Fatalf("isolated run: started %v, status %d; want a run to the end, status 0\n%s", res.Started, res.Status, res.Log)
	}
	for _, l := range strings.Split(string(res.Log), "\n") {
		if strings.HasPrefix(l, "HOLE") || strings.HasPrefix(l, "LOST") {
			t.Errorf("%s", l)
		}
	}
	if b, err := os.ReadFile(filepath.Join(guard, "file")); err != nil || string(b) != "kept\n" {
		t.Errorf("%s/file = %q, %v after the run; want it unchanged", guard, b, err)
	}
	if len(daemons) > 0 {
		t.Errorf("the run's setsid daemon (sleep %s) outlived the run: pids %v", token, daemons)
	}
	if _, err := os.Stat(filepath.Join(work, "in-work")); err != nil {
		t.Errorf("the run could not write its working directory: %v", err)
	}
}

// TestIsolatedRunTimeout: an isolated run whose time is up ends as a run
// with no isolation does (its PID 1 passes the group's SIGTERM by; the
// command and then the namespace end), within the kill grace.
func TestIsolatedRunTimeout(t *testing.T) {
	e := scratch(t, "echo started; sleep 60\n")
	start := time.Now()
	res, err := e.Run(t.Context(), RunOptions{WorkDir: filepath.Join(t.TempDir(), "w"), Timeout: time.Second, Isolate: isolation(t)})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a 1 s timeout took %v", took)
	}
	if !res.Started || !res.TimedOut || res.Verdict.ExitClass != verdict.Timeout {
		t.Errorf("timed out isolated run: started %v, timed out %v, class %s; want true, true, %s\n%s",
			res.Started, res.TimedOut, res.Verdict.ExitClass, verdict.Timeout, res.Log)
	}
}
