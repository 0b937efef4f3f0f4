package limits

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func TestCeilTo(t *testing.T) {
	for _, tc := range []struct{ X, Step, Want float64 }{
		{0, 30, 0}, {1, 30, 30}, {30, 30, 30}, {30.0000000001, 30, 30}, {31, 30, 60}, {2.2, 16, 16},
	} {
		if got := CeilTo(tc.X, tc.Step); got != tc.Want {
			t.Errorf("CeilTo(%v, %v) = %v, want %v", tc.X, tc.Step, got, tc.Want)
		}
	}
}

func TestLadder(t *testing.T) {
	for _, tc := range []struct{ X, Want float64 }{
		{0, 60}, {59.9, 60}, {60, 60}, {60.0000000001, 60}, {60.5, 120}, {75, 120}, {100, 120}, {121, 300},
		{3600, 3600}, {3601, 7200}, {9000, 10800},
	} {
		if got := Ladder(tc.X, timeoutLadder); got != tc.Want {
			t.Errorf("Ladder(%v, timeout) = %v, want %v", tc.X, got, tc.Want)
		}
	}
	// Two prunes whose slowest runs took 15.5 s and 19.8 s (what TCG gave the
	// generic exercise) must agree; with Phobos's 30 s steps they gave 90 and 120.
	if a, b := Ladder(5*15.5, timeoutLadder), Ladder(5*19.8, timeoutLadder); a != b {
		t.Errorf("timeouts of 15.5 s and 19.8 s runs differ: %v vs %v", a, b)
	}
}

func TestMargins(t *testing.T) {
	for _, tc := range []struct {
		Name string
		M    Measurement
		O    Options
		Want map[policy.LimitKey]string
	}{
		{"small run: every floor", Measurement{WallSeconds: 0.4, CPUSeconds: 0.1, Tasks: 3, HighestFD: 10, LargestFileMB: 0.01}, Options{},
			map[policy.LimitKey]string{policy.Timeout: "60", policy.CPU: "30", policy.NProc: "64", policy.NoFile: "256", policy.FsizeMB: "16"}},
		{"big run: the margins", Measurement{WallSeconds: 40, CPUSeconds: 12.5, Tasks: 40, HighestFD: 300, OpenFDs: 301, LargestFileMB: 20, VMPeakMB: 700}, Options{HeapPinned: true},
			map[policy.LimitKey]string{policy.Timeout: "300", policy.CPU: "120", policy.NProc: "128", policy.NoFile: "1024", policy.FsizeMB: "48", policy.MemMB: "1536"}},
		{"bash's script at fd 255: no margin on the number", Measurement{HighestFD: 255, OpenFDs: 5}, Options{},
			map[policy.LimitKey]string{policy.Timeout: "60", policy.CPU: "30", policy.NProc: "64", policy.NoFile: "256", policy.FsizeMB: "16"}},
		{"one fixed high descriptor: it fits, rounded up", Measurement{HighestFD: 1000, OpenFDs: 6}, Options{},
			map[policy.LimitKey]string{policy.Timeout: "60", policy.CPU: "30", policy.NProc: "64", policy.NoFile: "1024", policy.FsizeMB: "16"}},
		{"counts a few apart: one limit", Measurement{Tasks: 80, OpenFDs: 150}, Options{},
			map[policy.LimitKey]string{policy.Timeout: "60", policy.CPU: "30", policy.NProc: "256", policy.NoFile: "512", policy.FsizeMB: "16"}},
		{"counts a few apart: the other run", Measurement{Tasks: 85, OpenFDs: 160}, Options{},
			map[policy.LimitKey]string{policy.Timeout: "60", policy.CPU: "30", policy.NProc: "256", policy.NoFile: "512", policy.FsizeMB: "16"}},
		{"address space unbounded", Measurement{}, Options{HeapPinned: true, AddressSpaceUnbounded: true},
			map[policy.LimitKey]string{policy.Timeout: "60", policy.CPU: "30", policy.NProc: "64", policy.NoFile: "256", policy.FsizeMB: "16", policy.MemMB: "0"}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			got := Margins(tc.M, tc.O)
			if len(got) != len(tc.Want) {
				t.Errorf("Margins = %v, want %v", got, tc.Want)
			}
			for k, w := range tc.Want {
				if g := got[k].Format(k); g != w {
					t.Errorf("Margins(%+v)[%s] = %s, want %s", tc.M, k, g, w)
				}
			}
		})
	}
}

func TestSignature(t *testing.T) {
	lim := Margins(Measurement{}, Options{HeapPinned: true})
	for _, tc := range []struct {
		Name   string
		Status int
		CPU    float64
		Hits   []policy.LimitKey
		Want   policy.LimitKey
	}{
		{"timeout", 124, 0, nil, policy.Timeout},
		{"SIGXFSZ", 153, 0, nil, policy.FsizeMB},
		{"SIGXCPU", 152, 0, nil, policy.CPU},
		{"SIGKILL at the CPU limit", 137, 29.5, nil, policy.CPU},
		{"SIGKILL well below it (OOM killer)", 137, 3, nil, ""},
		{"EMFILE", 1, 0, []policy.LimitKey{policy.NoFile}, policy.NoFile},
		{"nofile before nproc", 1, 0, []policy.LimitKey{policy.NProc, policy.NoFile}, policy.NoFile},
		{"nothing", 1, 0, nil, ""},
	} {
		if got := Signature(tc.Status, tc.CPU, lim, tc.Hits); got != tc.Want {
			t.Errorf("%s: Signature = %q, want %q", tc.Name, got, tc.Want)
		}
	}
	if got := Signature(1, 0, map[policy.LimitKey]policy.Limit{}, []policy.LimitKey{policy.MemMB}); got != "" {
		t.Errorf("Signature with mem_mb unset = %q, want none", got)
	}
}

// measure runs cmd to its end with s watching it.
func measure(t *testing.T, s *Sampler, cmd *exec.Cmd) Measurement {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Watch(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return s.Stop()
}

// TestSampler watches a real child: it holds descriptor 9 open, spends CPU
// and starts a grandchild.
func TestSampler(t *testing.T) {
	m := measure(t, StartTree("", ""), exec.Command("/bin/bash", "-c", `exec 9</dev/null; x=0; for ((i=0;i<300000;i++)); do x=$((x+1)); done; sleep 0.3 & wait`))
	if m.Samples < 2 || m.HighestFD < 9 || m.OpenFDs < 4 || m.Tasks < 1 || m.CPUSeconds <= 0 || m.VMPeakMB <= 0 || m.WallSeconds <= 0 {
		t.Errorf("Sampler = %+v; want samples, fd ≥ 9, 4 or more open, tasks, CPU time, VmPeak and wall time", m)
	}
}

// TestNoFileShellScript measures a real bash script, which holds itself at
// fd 255: nofile must be the floor, 256, whether or not a sample caught
// that descriptor (two prunes of the generic exercise differed in nofile,
// 256 against 512, by that alone).
func TestNoFileShellScript(t *testing.T) {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "s.sh")
	if err := os.WriteFile(script, []byte("exec 3</dev/null 4</dev/null\nsleep 0.5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := measure(t, StartTree("", ""), exec.Command("/bin/bash", script))
	if m.HighestFD != 255 || m.OpenFDs < 5 || m.OpenFDs > 10 {
		t.Fatalf("Sampler = %+v; want bash's script at fd 255 and 5 to 10 open", m)
	}
	if got := Margins(m, Options{})[policy.NoFile].Value; got != 256 {
		t.Errorf("nofile = %d for a shell script, want the floor 256", got)
	}
	m.HighestFD = 10 // the same run, had no sample caught fd 255
	if got := Margins(m, Options{})[policy.NoFile].Value; got != 256 {
		t.Errorf("nofile = %d without fd 255, want 256 as well", got)
	}
}

// TestSamplerTree measures one process tree while another child of this
// process runs beside it: the other's descriptors must not count (before,
// two prunes in one test binary disagreed on nofile, 256 against 512,
// because each measured every child of the process).
func TestSamplerTree(t *testing.T) {
	// Descriptors this test process inherited (a CI runner's, a shell's)
	// would reach both children; keep them out of both.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("/bin/bash", "-c", `exec 200</dev/null; sleep 2`)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Wait()
	defer other.Process.Kill()
	s := StartTree("", "")
	time.Sleep(2 * Interval) // nothing is watched yet: nothing is sampled
	m := measure(t, s, exec.Command("/bin/bash", "-c", `exec 9</dev/null; sleep 0.5 & wait`))
	if m.HighestFD < 9 || m.HighestFD >= 200 || m.Samples < 2 || m.Tasks < 1 {
		t.Errorf("tree sampler = %+v; want fd 9 seen and the other child's fd 200 not, samples, tasks", m)
	}
}

func TestLargestFileMB(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "bigger"), make([]byte, 5<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, make([]byte, 7<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	if err := os.Chtimes(old, since.Add(-time.Hour), since.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{dir: {policy.Write: true}, other: {policy.Read: true}}}
	if got := LargestFileMB(p, since); got != 3 {
		t.Errorf("LargestFileMB = %v, want 3 (the read-only tree and the file older than the run do not count)", got)
	}
	if got := LargestFileMB(p, time.Time{}); got != 7 {
		t.Errorf("LargestFileMB(since zero) = %v, want 7", got)
	}
}

func BenchmarkSample(b *testing.B) {
	b.ReportAllocs()
	s := &Sampler{root: os.Getpid(), proc: "/proc", cpu: map[int]float64{}}
	for b.Loop() {
		s.sample()
	}
}
