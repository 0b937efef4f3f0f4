package main

import (
	"bufio"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/fulldisk"
	"golang.org/x/sys/unix"
)

// dirNames lists dir's entries (nil when it cannot be read).
func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestOrchestrateDiskFull: `lockstep orchestrate` onto a real tmpfs that
// has run out of space exits 1 naming ENOSPC and that the previous tree is
// unchanged; it is, and no temporary is left beside it.
func TestOrchestrateDiskFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "path_sets")
	copyFixture(t, path)
	disk := fulldisk.Mount(t, 1<<20)
	core := filepath.Join(disk, "core")
	args := []string{"orchestrate", "--langs", "java,python", "--path-dir", path, "--core-dir", core}
	if code, _, errs := runCLI(t, args...); code != cli.ExitOK {
		t.Fatalf("orchestrate with room = %d\n%s", code, errs)
	}
	before, err := os.ReadFile(filepath.Join(core, "BaseLanguage-java.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	// A merge of java alone copies python's files over: that needs room.
	fulldisk.Fill(t, disk, "filler", 0)
	code, _, errs := runCLI(t, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core)
	if code != cli.ExitFail || !strings.Contains(errs, "(the previous tree is unchanged)") || !strings.Contains(errs, "no space left on device") {
		t.Fatalf("orchestrate onto a full disk = %d, stderr %q; want 1 naming ENOSPC and the unchanged tree", code, errs)
	}
	t.Logf("the user sees: %s", strings.TrimSpace(errs))
	after, err := os.ReadFile(filepath.Join(core, "BaseLanguage-java.cfg"))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the tree changed on a full disk: %v", err)
	}
	if names := dirNames(disk); strings.Join(names, " ") != ".core.lock core filler" {
		t.Errorf("beside the tree: %v; want .core.lock, core and the filler only", names)
	}
}

// TestOrchestrateLocked: while another process (flock(1)) holds the tree's
// lock, `lockstep orchestrate` exits 1 saying another merge is writing, and
// writes nothing.
func TestOrchestrateLocked(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1) to hold the lock from another process")
	}
	dir := t.TempDir()
	path, core := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core")
	copyFixture(t, path)
	holder := exec.Command(flock, "--exclusive", filepath.Join(dir, ".core.lock"), "sh", "-c", "echo held; exec sleep 600")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		holder.Process.Kill()
		holder.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("flock did not take the lock: %q, %v", line, err)
	}
	code, _, errs := runCLI(t, "orchestrate", "--langs", "java,python", "--path-dir", path, "--core-dir", core)
	if code != cli.ExitFail || !strings.Contains(errs, "another merge is writing") {
		t.Fatalf("orchestrate beside a held lock = %d, stderr %q; want 1 saying another merge is writing", code, errs)
	}
	t.Logf("the user sees: %s", strings.TrimSpace(errs))
	if names := dirNames(dir); strings.Join(names, " ") != ".core.lock path_sets" {
		t.Errorf("beside the tree: %v; want the lock and the inputs only", names)
	}
}

// TestPruneDiskFull: `lockstep prune --on-host` whose --out is a real tmpfs
// that has run out of space. The exercise aborts at its baseline (it fails
// its own tests) and the abort record cannot be written: exit 1 naming the
// file and ENOSPC, no temporary left.
func TestPruneDiskFull(t *testing.T) {
	root, err := filepath.Abs("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	out := fulldisk.Mount(t, 64<<10)
	fulldisk.Fill(t, out, "filler", 0)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	t.Setenv("LOCKSTEP_GUEST", "")
	code, _, errs := runCLI(t, "prune", "--key", "broken", "--exercises", root, "--out", out, "--on-host", "--skip-containment",
		"--work-dir", filepath.Join(t.TempDir(), "testing-dir"))
	want := "write " + filepath.Join(out, "broken_failing-test.aborted.json") + ": write "
	if code != cli.ExitFail || !strings.Contains(errs, want) || !strings.Contains(errs, "no space left on device") {
		t.Fatalf("prune onto a full disk = %d, stderr %q; want 1 naming %s and ENOSPC", code, errs, filepath.Base(want))
	}
	t.Logf("the user sees: %s", strings.TrimSpace(errs))
	if names := dirNames(out); strings.Join(names, " ") != "filler" {
		t.Errorf("--out holds %v; want the filler alone", names)
	}
}

// lineWatch copies a stream into a buffer and closes seen once a line
// holds marker.
type lineWatch struct {
	mu     sync.Mutex
	b      bytes.Buffer
	marker string
	seen   chan struct{}
	done   chan struct{}
}

func watchLines(r io.Reader, marker string) *lineWatch {
	w := &lineWatch{marker: marker, seen: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			w.mu.Lock()
			w.b.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			if strings.Contains(sc.Text(), w.marker) {
				once.Do(func() { close(w.seen) })
			}
		}
	}()
	return w
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *lineWatch) saw() bool {
	select {
	case <-w.seen:
		return true
	default:
		return false
	}
}

// guestUp is the harness's progress line (with -v) when the guest's first
// event arrived: the boot phase is over, the job runs.
const guestUp = "guest up; running the command"

// signalVerb runs `lockstep -v <args>` with a private TMPDIR, sends sig
// mid-boot (SIGINT: shortly after QEMU started, before the guest is up) or
// mid-job (SIGTERM: once the guest is up), and checks what the user is
// promised: exit 3, no QEMU of the run left, no temp dir left. It returns
// stderr for the caller's own checks.
func signalVerb(t *testing.T, bin string, sig syscall.Signal, args ...string) string {
	t.Helper()
	tmp := t.TempDir()
	cmd := exec.Command(bin, append([]string{"-v"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "LOCKSTEP_GUEST=", "LOCKSTEP_DISPOSABLE=")
	pr, pw := io.Pipe()
	var stdout bytes.Buffer
	cmd.Stderr, cmd.Stdout = pw, &stdout
	stderr := watchLines(pr, guestUp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	phase := "boot"
	deadline := time.After(3 * time.Minute)
	if sig == syscall.SIGTERM {
		phase = "job"
		select {
		case <-stderr.seen:
		case err := <-exited:
			t.Fatalf("lockstep %s exited (%v) before the guest was up:\n%s", args[0], err, stderr)
		case <-deadline:
			t.Fatalf("the guest of lockstep %s was not up within 3 min:\n%s", args[0], stderr)
		}
	} else {
		for len(qemuWith(tmp)) == 0 {
			select {
			case err := <-exited:
				t.Fatalf("lockstep %s exited (%v) before QEMU started:\n%s", args[0], err, stderr)
			case <-deadline:
				t.Fatalf("no QEMU of lockstep %s within 3 min:\n%s", args[0], stderr)
			case <-time.After(20 * time.Millisecond):
			}
		}
		time.Sleep(300 * time.Millisecond)
		if stderr.saw() {
			t.Fatalf("the guest was up before the signal could land in the boot phase:\n%s", stderr)
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("lockstep %s did not exit within 60 s of %v in the %s phase:\n%s", args[0], sig, phase, stderr)
	}
	<-stderr.done
	t.Logf("%v in the %s phase: exit %d after %v", sig, phase, exitCode(err), time.Since(t0).Round(time.Millisecond))
	if got := exitCode(err); got != cli.ExitIndeterminate {
		t.Errorf("lockstep %s after %v in the %s phase exited %d, want %d; stderr:\n%s", args[0], sig, phase, got, cli.ExitIndeterminate, stderr)
	}
	// repro and verify print their verdict on stdout, the others on stderr.
	said := strings.TrimSpace(stderr.String()) + "\n" + strings.TrimSpace(stdout.String())
	for _, l := range strings.Split(said, "\n") {
		if strings.Contains(l, "interrupted") || strings.HasPrefix(l, "status ") {
			t.Logf("the user sees: %s", l)
		}
	}
	if !strings.Contains(said, "interrupted: context canceled") {
		t.Errorf("the output does not say the run was interrupted:\n%s\n%s", stdout.String(), stderr)
	}
	if procs := qemuWith(tmp); len(procs) > 0 {
		t.Errorf("QEMU survived %v: pids %v", sig, procs)
	}
	if names := dirNames(tmp); len(names) > 0 {
		t.Errorf("temp files survived %v: %v", sig, names)
	}
	return stderr.String()
}

// signalEnv is what the signal tests share: the binary, the pinned
// kernel's bzImage and the repository's test data, absolute.
func signalEnv(t *testing.T) (bin, bz string, data func(rel string) string) {
	t.Helper()
	bin, bz, _ = bootEnv(t)
	return bin, bz, func(rel string) string {
		p, err := filepath.Abs(filepath.Join("../..", rel))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

var bothSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}

func TestSignalBoot(t *testing.T) {
	bin, bz, _ := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			results := t.TempDir()
			signalVerb(t, bin, sig, "boot", "--kernel", bz, "--accel", "tcg", "--results", results, "--", "sh", "-c", "echo > /run/lockstep/results/partial; exec sleep 600")
			// run.json says why; nothing of the guest's results is unpacked.
			if names := dirNames(results); strings.Join(names, " ") != "run.json" {
				t.Errorf("--results holds %v; want run.json alone", names)
			}
		})
	}
}

func TestSignalSelftest(t *testing.T) {
	bin, bz, _ := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			signalVerb(t, bin, sig, "selftest", "--kernel", bz, "--accel", "tcg")
		})
	}
}

// TestSignalPrune: the key's earlier artefacts in --out are kept (--out is
// prepared only once a guest has reported).
func TestSignalPrune(t *testing.T) {
	bin, bz, data := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			out := t.TempDir()
			earlier := filepath.Join(out, "generic_shell-reference.cfg")
			if err := os.WriteFile(earlier, []byte("[read]\n/usr\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			signalVerb(t, bin, sig, "prune", "--key", "generic", "--exercises", data("testdata/exercises"), "--out", out,
				"--kernel", bz, "--accel", "tcg")
			if names := dirNames(out); strings.Join(names, " ") != filepath.Base(earlier) {
				t.Errorf("--out holds %v; want the earlier %s alone", names, filepath.Base(earlier))
			}
		})
	}
}

// TestSignalObserve: the path set keeps the prune's .cfg and record, an
// earlier run's .abi10 file is gone (it would vouch for what this run did
// not observe), and the run.json observe writes says status 3.
func TestSignalObserve(t *testing.T) {
	bin, bz, data := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			ps := t.TempDir()
			for _, n := range []string{"fixture_udp-fixture.cfg", "fixture_udp-fixture.json"} {
				b, err := os.ReadFile(filepath.Join(data("testdata/path_sets/fixture"), n))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ps, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(ps, "fixture_udp-fixture.abi10.json"), []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			signalVerb(t, bin, sig, "observe", "--key", "fixture", "--exercises", data("testdata/exercises"), "--path-sets", ps,
				"--kernel", bz, "--accel", "tcg", "--cpus", "1")
			// This run's own artefacts (the console so far, the kernel's
			// configuration) stay beside run.json: they say how far it got.
			if names := dirNames(ps); strings.Join(names, " ") != "fixture_udp-fixture.cfg fixture_udp-fixture.json kernel.config kvm-console.log run.json" {
				t.Errorf("the path set holds %v; want the .cfg, the record, run.json and this run's kernel.config and kvm-console.log", names)
			}
			if b, _ := os.ReadFile(filepath.Join(ps, "run.json")); !bytes.Contains(b, []byte(`"status": 3`)) {
				t.Errorf("run.json does not say status 3:\n%s", b)
			}
		})
	}
}

// TestSignalRepro: two guests at once (the kernel twice), both interrupted.
func TestSignalRepro(t *testing.T) {
	bin, bz, data := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			signalVerb(t, bin, sig, "repro", "--kernel", bz, "--kernel", bz, "--accel", "tcg", "--config", data("repro/testdata/udp.cfg"), "--", "true")
		})
	}
}

func TestSignalVerify(t *testing.T) {
	bin, bz, data := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			signalVerb(t, bin, sig, "verify", "--base", data("verify/testdata/BaseLanguage-generic.cfg"), "--kernel", bz,
				"--exercises", data("verify/testdata/exercises"), "--key", "generic", "--exercise", "counting", "--accel", "tcg", "--parallel", "1")
		})
	}
}

// TestSignalRecord: an interrupted `record run` adds no session to the
// recording (nothing half-written under D/N).
func TestSignalRecord(t *testing.T) {
	bin, bz, _ := signalEnv(t)
	for _, sig := range bothSignals {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(t.TempDir(), "wait.script")
			if err := os.WriteFile(script, []byte("expect never-printed 600\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			signalVerb(t, bin, sig, "record", "run", "--name", "cat", "--dir", dir, "--script", script,
				"--kernel", bz, "--accel", "tcg", "--", "cat")
			if names := treeNames(t, dir); len(names) > 0 {
				t.Errorf("the interrupted session left %v in the recordings directory", names)
			}
		})
	}
}

// treeNames lists every file (not directory) below dir, relative to it.
func treeNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestBootGuestOOM boots a 128 MiB guest whose command allocates (and
// touches) 16 MiB after 16 MiB until the guest kernel's OOM killer takes
// it: the status is 137 (SIGKILL), and the console's OOM-killer line is
// surfaced on stderr and in run.json.
func TestBootGuestOOM(t *testing.T) {
	bin, bz, tmp := bootEnv(t)
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no /usr/bin/perl to allocate in the guest")
	}
	results := t.TempDir()
	cmd, _, stderr := bootCmd(t.Context(), bin, tmp, "--kernel", bz, "--accel", "tcg", "--mem", "128", "--results", results,
		"--", "/usr/bin/perl", "-e", `push @a, "x" x (16 << 20) while 1`)
	err := cmd.Run()
	t.Logf("the user sees (exit %d):\n%s", exitCode(err), stderr)
	if got := exitCode(err); got != cli.ExitCapPassed {
		t.Fatalf("lockstep boot of a command the guest's OOM killer takes = %d, want 137\n%s", got, stderr)
	}
	if !strings.Contains(stderr.String(), "the guest ran out of memory and its kernel killed a process mem_mb=128") ||
		!strings.Contains(stderr.String(), "Out of memory: Killed process ") || !strings.Contains(stderr.String(), "(perl)") {
		t.Errorf("stderr does not surface the guest's OOM-killer line naming perl:\n%s", stderr)
	}
	b, err := os.ReadFile(filepath.Join(results, "run.json"))
	if err != nil || !bytes.Contains(b, []byte(`"oom_kills": [`)) {
		t.Errorf("run.json lacks oom_kills: %v\n%s", err, b)
	}
	// PID 1's witness line: SIGKILL, and the kernel counted the OOM kill.
	if !bytes.Contains(b, []byte(`"signaled": "signal=9 (killed)`)) || bytes.Contains(b, []byte(" oom_kill=0 ")) {
		t.Errorf("run.json lacks PID 1's signaled line with a non-zero oom_kill:\n%s", b)
	}
	if names := dirNames(tmp); len(names) > 0 {
		t.Errorf("temp files left: %v", names)
	}
}

// TestBootGuestSignaled: a command killed by a SIGKILL that no OOM killer
// sent exits 137, and PID 1's witness line says so (oom_kill=0) with the
// command's CPU time, in run.json and as a warning: the cause of a 137 is
// told apart from an OOM kill without reproducing it.
func TestBootGuestSignaled(t *testing.T) {
	bin, bz, tmp := bootEnv(t)
	results := t.TempDir()
	cmd, _, stderr := bootCmd(t.Context(), bin, tmp, "--kernel", bz, "--accel", "tcg", "--results", results,
		"--", "/bin/sh", "-c", "kill -KILL $$")
	err := cmd.Run()
	t.Logf("the user sees (exit %d):\n%s", exitCode(err), stderr)
	if got := exitCode(err); got != cli.ExitCapPassed {
		t.Fatalf("lockstep boot of a command that kills itself = %d, want 137\n%s", got, stderr)
	}
	if !strings.Contains(stderr.String(), "the command died by a signal no OOM killer sent") ||
		!strings.Contains(stderr.String(), "signal=9 (killed)") || !strings.Contains(stderr.String(), " oom_kill=0 ") {
		t.Errorf("stderr does not carry PID 1's witness line with oom_kill=0:\n%s", stderr)
	}
	b, err := os.ReadFile(filepath.Join(results, "run.json"))
	if err != nil || !bytes.Contains(b, []byte(`"signaled": "signal=9 (killed) job_pid=`)) || !bytes.Contains(b, []byte(" job_user_s=")) {
		t.Errorf("run.json lacks the signaled line: %v\n%s", err, b)
	}
}
