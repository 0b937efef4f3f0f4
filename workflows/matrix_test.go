package workflows

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// matrixPlan is what the plan stage prints for GITHUB_OUTPUT.
type matrixPlan struct {
	Kernels []string `json:"kernels"`
	Legs    []struct {
		Base   string `json:"base"`
		Kernel string `json:"kernel"`
	} `json:"legs"`
}

// runMatrixPlan runs the plan stage of scripts/kernel-matrix.sh, as the plan
// job does, and returns the plan it prints, or the exit status.
func runMatrixPlan(t *testing.T, bin string, args ...string) (matrixPlan, int) {
	t.Helper()
	return runMatrixPlanEnv(t, bin, nil, args...)
}

// runMatrixPlanEnv is runMatrixPlan with env added to the plan's environment
// (the job's GITHUB_ENV lines).
func runMatrixPlanEnv(t *testing.T, bin string, env []string, args ...string) (matrixPlan, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot(t), "scripts", "kernel-matrix.sh"), append([]string{"plan"}, args...)...)
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH")), env...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return matrixPlan{}, ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "plan=")
	if !ok || strings.Contains(line, "\n") {
		t.Fatalf("plan printed %q, want one line plan=<JSON>", out)
	}
	var p matrixPlan
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		t.Fatalf("plan printed %q: %v", line, err)
	}
	return p, 0
}

// TestKernelMatrixPlan: with no inputs the plan is every shipped base (the
// BaseLanguage-<key>.cfg files of bases/) on every kernel, each kernel
// once, the shipped pins among them; the inputs narrow it to a matrix of
// one, and extra pin rows add their kernels; a base or pin that does not
// exist fails the plan, before any leg.
func TestKernelMatrixPlan(t *testing.T) {
	bin := lockstepbin.Build(t)
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "bases", "BaseLanguage-*.cfg"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped base (%v)", err)
	}
	var bases []string
	for _, f := range files {
		bases = append(bases, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "BaseLanguage-"), ".cfg"))
	}
	sort.Strings(bases)
	p, code := runMatrixPlan(t, bin)
	if code != 0 {
		t.Fatalf("plan exited %d", code)
	}
	for _, pin := range []string{"6.12.117", "7.2.13", "7.3.4"} {
		if !slices.Contains(p.Kernels, pin) {
			t.Errorf("the plan's kernels %v lack the shipped pin %s", p.Kernels, pin)
		}
	}
	if len(p.Legs) != len(bases)*len(p.Kernels) {
		t.Errorf("%d legs, want %d bases × %d kernels", len(p.Legs), len(bases), len(p.Kernels))
	}
	var planned []string
	for i, l := range p.Legs {
		if l.Kernel != p.Kernels[i%len(p.Kernels)] {
			t.Errorf("leg %d: %s on %s, want every kernel for each base in turn", i, l.Base, l.Kernel)
		}
		if i%len(p.Kernels) == 0 {
			planned = append(planned, l.Base)
		}
	}
	if !slices.Equal(planned, bases) {
		t.Errorf("the plan's bases %v, want bases/'s %v", planned, bases)
	}
	one, code := runMatrixPlan(t, bin, "--bases", "generic", "--pins", "7.2.13")
	if code != 0 || len(one.Legs) != 1 || one.Legs[0].Base != "generic" || one.Legs[0].Kernel != "7.2.13" || !slices.Equal(one.Kernels, []string{"7.2.13"}) {
		t.Errorf("plan --bases generic --pins 7.2.13 = %+v (exit %d), want the one leg", one, code)
	}
	// The workflow's extra-pins input: the pins stage writes the rows and
	// prints the GITHUB_ENV line; the plan then has the new pin too.
	row := "7.3.5 abi=11 source=url url=file:///nonexistent/linux-7.3.5.tar.xz sha256=" + strings.Repeat("0", 64)
	pins := exec.CommandContext(t.Context(), filepath.Join(repoRoot(t), "scripts", "kernel-matrix.sh"), "pins", "--extra-pins", row, "--out", t.TempDir())
	envLine, err := pins.Output()
	if err != nil || !strings.HasPrefix(string(envLine), "LOCKSTEP_PINS=") {
		t.Fatalf("pins stage printed %q (%v), want LOCKSTEP_PINS=<file>", envLine, err)
	}
	extra, code := runMatrixPlanEnv(t, bin, []string{strings.TrimSpace(string(envLine))}, "--bases", "generic")
	if code != 0 || !slices.Equal(extra.Kernels, append(slices.Clone(p.Kernels), "7.3.5")) {
		t.Errorf("plan with the extra row = %+v (exit %d), want every pin and 7.3.5", extra, code)
	}
	for _, args := range [][]string{{"--bases", "rust"}, {"--pins", "9.9.9"}} {
		if _, code := runMatrixPlan(t, bin, args...); code != 2 {
			t.Errorf("plan %v exited %d, want 2", args, code)
		}
	}
}

// TestKernelMatrixWorkflowShape: kernel-matrix.yml takes its legs from the
// plan job (kernels and legs, never a literal list), builds each kernel once
// and only restores it in the legs, runs legs and the summary also when
// another leg failed, and its gate runs always and needs every job.
func TestKernelMatrixWorkflowShape(t *testing.T) {
	jobs := loadJobs(t, ".github/workflows/kernel-matrix.yml")
	for _, j := range []string{"plan", "kernel", "verify", "summary", "gate"} {
		if _, ok := jobs[j]; !ok {
			t.Fatalf("no job %s", j)
		}
	}
	for dim, want := range map[string]string{"kernel/pin": "${{ fromJSON(needs.plan.outputs.plan).kernels }}", "verify/leg": "${{ fromJSON(needs.plan.outputs.plan).legs }}"} {
		job, d, _ := strings.Cut(dim, "/")
		j := jobs[job]
		if n := j.Strategy.Matrix[d]; n.Value != want || len(j.Strategy.Matrix) != 1 {
			t.Errorf("job %s: matrix %s = %q, want only %s", job, d, n.Value, want)
		}
		if j.Strategy.FailFast == nil || *j.Strategy.FailFast {
			t.Errorf("job %s: want strategy.fail-fast: false", job)
		}
	}
	for _, name := range []string{"verify", "summary"} {
		if !strings.Contains(jobs[name].If, "!cancelled()") {
			t.Errorf("job %s: if = %q, want it to run when another leg failed (!cancelled())", name, jobs[name].If)
		}
	}
	checkKernelBuiltOnce(t, jobs, "verify")
	gate := jobs["gate"]
	needs, _ := gate.Needs.([]any)
	if gate.If != "${{ always() }}" || len(needs) != 4 {
		t.Errorf("job gate: if %q, needs %v; want always() over plan, kernel, verify and summary", gate.If, gate.Needs)
	}
	for _, s := range gate.Steps {
		for _, j := range []string{"PLAN", "KERNEL", "VERIFY", "SUMMARY"} {
			if !strings.Contains(s.Run, `test "$`+j+`" = success`) {
				t.Errorf("job gate: its step does not require %s to be success", j)
			}
		}
	}
}
