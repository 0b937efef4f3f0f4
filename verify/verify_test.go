package verify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/harness"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		Name     string
		Verdicts []string
		Want     int
	}{
		{"AllPass", []string{Pass, Pass}, StatusPass},
		{"AnyFail", []string{Pass, Indeterminate, Fail}, StatusFail},
		{"IndeterminateNoFail", []string{Pass, Indeterminate}, StatusIndeterminate},
		{"UnknownVerdictIsNotPass", []string{Pass, ""}, StatusIndeterminate},
		{"InconclusiveCountsIndeterminate", []string{Inconclusive, Pass}, StatusIndeterminate},
		// 1 is worse than 3: a fold by max alone would give 3 here.
		{"FailBeforeIndeterminate", []string{Fail, Indeterminate}, StatusFail},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			var cells []*Cell
			for _, v := range tt.Verdicts {
				cells = append(cells, &Cell{Verdict: v})
			}
			if got := status(cells); got != tt.Want {
				t.Errorf("status(%v) = %d, want %d", tt.Verdicts, got, tt.Want)
			}
		})
	}
}

// TestCellOfNoReport: a guest that left no cell is indeterminate with the
// harness's reason and the console's tail, never pass.
func TestCellOfNoReport(t *testing.T) {
	res := &Result{Kernels: []KernelInfo{{Name: "7.2.13", ABI: 10}, {Name: "6.12.117", ABI: 6}}, Exercises: []string{"a", "b"}}
	run := &harness.Result{Status: 3, ConsoleTail: []string{"[    1.0] Kernel panic - not syncing: VFS"}}
	c := cellOf(t.TempDir(), res, 3, run, errors.New("indeterminate: no LOCKSTEP-STATUS line on the console"))
	if c.Kernel != "6.12.117" || c.Exercise != "b" || c.Verdict != Indeterminate || !strings.Contains(c.Why, "did not report") ||
		len(c.Console) != 1 || c.Guest == nil {
		t.Errorf("cellOf = %+v, want 6.12.117 × b indeterminate with the console tail", c)
	}
}

// TestCellOfOOMKill: a guest whose OOM killer took the job names it in the
// cell's reason, not only a bare 137.
func TestCellOfOOMKill(t *testing.T) {
	res := &Result{Kernels: []KernelInfo{{Name: "7.2.13", ABI: 10}}, Exercises: []string{"a"}}
	run := &harness.Result{Status: 137, OOMKills: []string{"Out of memory: Killed process 34 (lockstep)"}}
	c := cellOf(t.TempDir(), res, 0, run, nil)
	if c.Verdict != Indeterminate || !strings.Contains(c.Why, "exited 137") || !strings.Contains(c.Why, "OOM killer ran: Out of memory: Killed process 34") {
		t.Errorf("cellOf = %q (%s), want indeterminate naming the OOM kill", c.Why, c.Verdict)
	}
}

// TestCellOfReadsCell: a reported cell is taken as the guest wrote it; a
// pass from a guest whose run then failed, or whose job did not exit 0
// (the role exits 0 once its cell is written), is not kept as a pass.
func TestCellOfReadsCell(t *testing.T) {
	dir := t.TempDir()
	doc := `{"schema":1,"kernel":"7.2.13","exercise":"a","verdict":"pass","release":"7.2.13","abi":10,"reference":"ok","joint":[],"unenforceable":[],"containment":[],"seconds":1}`
	if err := os.WriteFile(filepath.Join(dir, CellFile), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res := &Result{Kernels: []KernelInfo{{Name: "7.2.13"}}, Exercises: []string{"a"}}
	if c := cellOf(dir, res, 0, &harness.Result{}, nil); c.Verdict != Pass {
		t.Errorf("cellOf = %+v, want the guest's pass", c)
	}
	if c := cellOf(dir, res, 0, &harness.Result{}, errors.New("results archive checksum mismatch")); c.Verdict != Indeterminate {
		t.Errorf("cellOf after a failed run = %+v, want indeterminate", c)
	}
	if c := cellOf(dir, res, 0, &harness.Result{Status: 137}, nil); c.Verdict != Indeterminate || !strings.Contains(c.Why, "exited 137 after writing a passing cell") {
		t.Errorf("cellOf of a pass from a job that died = %+v, want indeterminate", c)
	}
}

func TestReadCellSchema(t *testing.T) {
	f := filepath.Join(t.TempDir(), CellFile)
	if err := os.WriteFile(f, []byte(`{"schema":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCell(f); err == nil || !strings.Contains(err.Error(), "schema 2, want 1") {
		t.Errorf("ReadCell(schema 2) = %v, want a schema error", err)
	}
}

// TestJointRuns: 0 is the default, a count is itself, and a negative one
// is refused (no joint run would pass every cell), for Host and Here alike.
func TestJointRuns(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{0, DefaultJointRuns}, {1, 1}, {3, 3}} {
		if got, err := jointRuns(tc.in); got != tc.want || err != nil {
			t.Errorf("jointRuns(%d) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	if _, err := jointRuns(-1); err == nil || !strings.Contains(err.Error(), "want at least 1") {
		t.Errorf("jointRuns(-1) = %v; want a refusal", err)
	}
	if _, err := Host(t.Context(), HostOptions{Policy: &policy.Policy{}, Kernels: []Kernel{{Name: "k"}}, Exercises: "e", Key: "k", JointRuns: -1}); err == nil {
		t.Error("Host with -1 joint runs: no error")
	}
}
