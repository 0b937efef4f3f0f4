package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/fulldisk"
)

// watchWriter keeps what is written to it and closes seen once it holds
// marker.
type watchWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func newWatchWriter(marker string) *watchWriter {
	return &watchWriter{marker: marker, seen: make(chan struct{})}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// ourQEMU waits until exactly one QEMU process of this test binary runs and
// returns its pid.
func ourQEMU(t *testing.T, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if procs := qemuProcesses(privateTmp); len(procs) == 1 {
			pid, err := strconv.Atoi(procs[0][:strings.IndexByte(procs[0], ':')])
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no single QEMU of ours within %v: %v", limit, qemuProcesses(privateTmp))
	return 0
}

// bytesRead is this process's rchar: every byte its read(2) calls returned,
// the guest channels' included.
func bytesRead(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/self/io:\n%s", b)
	return 0
}

// onlyRunJSON fails t unless dir holds run.json alone, saying status 3:
// nothing of a guest that did not report whole was unpacked.
func onlyRunJSON(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "run.json" {
		t.Errorf("results dir holds %v; want run.json alone", names)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "run.json"))
	if !bytes.Contains(b, []byte(`"status": 3,`)) {
		t.Errorf("run.json does not say status 3:\n%s", b)
	}
}

// TestQEMUKilled kills QEMU with SIGKILL, from outside, in each phase of a
// run: while the guest boots (it hangs before its first event, so the kill
// lands in the boot phase), while the job runs (after its first output),
// and while the results frame crosses (the host has read a megabyte of a
// 32 MiB frame). Each is indeterminate (3), the reason names what was
// missing and that QEMU was killed, and nothing is unpacked.
func TestQEMUKilled(t *testing.T) {
	bz := needGuest(t)
	const frame = 32 << 20
	for _, tc := range []struct {
		Name   string
		Hook   string
		Script string
		Marker string // stdout that starts the phase; "" when QEMU's start does
		Frame  bool   // wait for the results frame to be on its way
		Want   []string
	}{
		{"boot", proto.HookHangBoot, "true", "", false,
			[]string{"no LOCKSTEP-STATUS line", "without a done event (0 events read)", "QEMU ended before lockstep stopped it: signal: killed"}},
		{"job", "", "echo job-started; exec sleep 600", "job-started", false,
			[]string{"no LOCKSTEP-STATUS line", "without a done event", "QEMU ended before lockstep stopped it: signal: killed"}},
		{"results", "", fmt.Sprintf("head -c %d /dev/urandom > %s/blob && echo packing", frame, proto.ResultsDir), "packing", true,
			[]string{"no LOCKSTEP-STATUS line", "read results frame payload", "unexpected EOF", "QEMU ended before lockstep stopped it: signal: killed"}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			o, _, _ := opts(t, bz, "/bin/sh", "-c", tc.Script)
			stdout := newWatchWriter(tc.Marker)
			o.Stdout, o.TestHook, o.ResultsDir = stdout, tc.Hook, t.TempDir()
			// 1 GiB: under make test-race the guest's PID 1 is this test binary
			// built with the race detector, whose shadow memory for the 32 MiB
			// results frame left a 512 MiB guest dying mid-frame (2 of 2 runs).
			o.MemMB = 1024
			type ran struct {
				res *Result
				err error
			}
			done := make(chan ran, 1)
			go func() { r, err := Run(t.Context(), o); done <- ran{r, err} }()
			pid := ourQEMU(t, time.Minute)
			var base int64
			if tc.Marker != "" {
				select {
				case <-stdout.seen:
					base = bytesRead(t)
				case r := <-done:
					t.Fatalf("Run returned before %q: %+v, %v", tc.Marker, r.res, r.err)
				}
			} else {
				time.Sleep(time.Second) // the kernel is booting, PID 1 hangs before hello
			}
			for tc.Frame && bytesRead(t)-base < 1<<20 {
				select {
				case r := <-done:
					t.Fatalf("Run returned before the frame was a megabyte in: %+v, %v", r.res, r.err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			if tc.Frame {
				t.Logf("killing QEMU with %d bytes read since %q", bytesRead(t)-base, tc.Marker)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.res == nil || r.res.Status != proto.StatusIndeterminate || !errors.Is(r.err, ErrIndeterminate) {
				t.Fatalf("Run with QEMU killed = %+v, %v; want status 3, ErrIndeterminate", r.res, r.err)
			}
			t.Logf("the user sees: %v", r.err)
			for _, w := range tc.Want {
				if !strings.Contains(r.res.Reason, w) {
					t.Errorf("reason lacks %q:\n%s", w, r.res.Reason)
				}
			}
			onlyRunJSON(t, o.ResultsDir)
			checkNoQEMU(t)
		})
	}
}

// TestResultsCorrupted: the guest flips one byte of its results frame's
// payload after the checksum was taken (proto.HookCorruptResults). The
// command exited 0 and said so on the console and in its done event, but
// the run is indeterminate, the reason names the checksum mismatch, and
// nothing is unpacked.
func TestResultsCorrupted(t *testing.T) {
	bz := needGuest(t)
	o, _, _ := opts(t, bz, "/bin/sh", "-c", "echo result > "+proto.ResultsDir+"/r.txt")
	o.TestHook, o.ResultsDir = proto.HookCorruptResults, t.TempDir()
	res, err := Run(t.Context(), o)
	if res == nil || res.Status != proto.StatusIndeterminate || !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("Run with a corrupted frame = %+v, %v; want status 3, ErrIndeterminate", res, err)
	}
	t.Logf("the user sees: %v", err)
	if !strings.Contains(res.Reason, "results frame: checksum mismatch") {
		t.Errorf("reason does not name the checksum mismatch: %s", res.Reason)
	}
	if st, ok := proto.ParseStatus([]byte(strings.Join(res.ConsoleTail, "\n"))); !ok || st != 0 {
		t.Errorf("console status %d, %v; want the command's 0 there", st, ok)
	}
	onlyRunJSON(t, o.ResultsDir)
	checkNoQEMU(t)
}

// TestResultsDiskFull: the results directory is on a 1 MiB tmpfs and the
// guest ships 2 MiB. The run is indeterminate and the reason names the file
// and ENOSPC; what fit of the file stays (truncated: the status, not the
// files, says the run is not to be trusted), and run.json, which no longer
// fits either, is missing rather than truncated.
func TestResultsDiskFull(t *testing.T) {
	bz := needGuest(t)
	o, _, _ := opts(t, bz, "/bin/sh", "-c", "head -c 2097152 /dev/urandom > "+proto.ResultsDir+"/blob")
	o.ResultsDir = filepath.Join(fulldisk.Mount(t, 1<<20), "results")
	res, err := Run(context.Background(), o)
	if res == nil || res.Status != proto.StatusIndeterminate || !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("Run onto a full disk = %+v, %v; want status 3, ErrIndeterminate", res, err)
	}
	t.Logf("the user sees: %v", err)
	if !strings.Contains(res.Reason, "unpack results: blob:") || !strings.Contains(res.Reason, "no space left on device") {
		t.Errorf("reason does not name the blob and ENOSPC: %s", res.Reason)
	}
	fi, err := os.Stat(filepath.Join(o.ResultsDir, "blob"))
	if err != nil || fi.Size() >= 2<<20 {
		t.Errorf("blob on the full disk: %v, %v; want a truncated file", fi, err)
	}
	// run.json, which no longer fits, is missing, not truncated.
	if ents, _ := os.ReadDir(o.ResultsDir); len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the full results dir holds %v; want the truncated blob alone", names)
	}
	checkNoQEMU(t)
}

func TestOOMKills(t *testing.T) {
	console := "[    1.0] boot\r\n" +
		"[    9.1] perl invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\r\n" +
		"[    9.2] Out of memory: Killed process 93 (perl) total-vm:131420kB, anon-rss:110000kB, file-rss:4kB, shmem-rss:0kB, UID:0 pgtables:300kB oom_score_adj:0\r\n" +
		"[    9.3] Memory cgroup out of memory: Killed process 97 (python3) total-vm:9000kB, anon-rss:8000kB\n" +
		"LOCKSTEP-STATUS 137\n"
	got := oomKills(splitConsole(console))
	want := []string{
		"[    9.2] Out of memory: Killed process 93 (perl) total-vm:131420kB, anon-rss:110000kB, file-rss:4kB, shmem-rss:0kB, UID:0 pgtables:300kB oom_score_adj:0",
		"[    9.3] Memory cgroup out of memory: Killed process 97 (python3) total-vm:9000kB, anon-rss:8000kB",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("oomKills = %q\nwant %q", got, want)
	}
	if got := oomKills(splitConsole(strings.Repeat("Out of memory: Killed process 1 (x)\n", 50))); len(got) != maxOOMKills {
		t.Errorf("oomKills kept %d of 50 lines, want %d", len(got), maxOOMKills)
	}
	if got := oomKills(splitConsole("LOCKSTEP-STATUS 0\n")); got != nil {
		t.Errorf("oomKills of a console without one = %q", got)
	}
}

// TestSignaledLine: PID 1's line about a command that died by a signal is
// found among the console's lines, '\r' stripped, and only that one.
func TestSignaledLine(t *testing.T) {
	console := "[    1.0] boot\r\n" +
		"\r\nLOCKSTEP-JOB-SIGNALED signal=9 (killed) job_user_s=0.01 job_sys_s=0.00 job_maxrss_kb=1800 oom_kill=0 mem_available_kb=400000 mem_total_kb=480000 last_pid=77\r\n" +
		"LOCKSTEP-STATUS 137\r\n"
	want := "signal=9 (killed) job_user_s=0.01 job_sys_s=0.00 job_maxrss_kb=1800 oom_kill=0 mem_available_kb=400000 mem_total_kb=480000 last_pid=77"
	if got := signaledLine(splitConsole(console)); got != want {
		t.Errorf("signaledLine = %q\nwant %q", got, want)
	}
	if got := signaledLine(splitConsole("LOCKSTEP-STATUS 0\n")); got != "" {
		t.Errorf("signaledLine of a console without one = %q", got)
	}
}

// splitConsole is every line of console, as conclude splits it.
func splitConsole(console string) []string { return consoleLines([]byte(console), len(console)+1) }

// FuzzOOMKills: the console is the guest's; every line returned is one of
// its lines naming a kill, and there are never more than maxOOMKills.
func FuzzOOMKills(f *testing.F) {
	f.Add([]byte("[ 9.2] Out of memory: Killed process 93 (perl)\r\nLOCKSTEP-STATUS 137\n"))
	f.Add([]byte("Memory cgroup out of memory: Killed process 1 (a)\n\n\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := oomKills(splitConsole(string(b)))
		if len(got) > maxOOMKills {
			t.Fatalf("%d lines, more than %d", len(got), maxOOMKills)
		}
		clean := strings.ReplaceAll(string(b), "\r", "")
		for _, l := range got {
			if !strings.Contains(clean, l) || !strings.Contains(strings.ToLower(l), "out of memory: killed process") {
				t.Fatalf("line %q is not a kill line of the console", l)
			}
		}
	})
}

// TestJudgeFrameCutShort: without a done event, a results frame cut short
// is named among the problems; one that never started (EOF before its
// header: the guest had not begun to send) is not.
func TestJudgeFrameCutShort(t *testing.T) {
	console := []byte("[ 1.0] boot\n")
	cut := fmt.Errorf("read results frame payload (33554432 bytes): %w", io.ErrUnexpectedEOF)
	v := judge(outcome{console: console, events: proto.ErrMissingDone, results: cut})
	if !strings.Contains(strings.Join(v.problems, "; "), "read results frame payload (33554432 bytes): unexpected EOF") {
		t.Errorf("judge of a frame cut short = %+v, want it named", v)
	}
	never := fmt.Errorf("read results frame header: %w", io.EOF)
	v = judge(outcome{console: console, events: proto.ErrMissingDone, results: never})
	if strings.Contains(strings.Join(v.problems, "; "), "frame") {
		t.Errorf("judge of a frame never begun = %+v, want it left out", v)
	}
}
