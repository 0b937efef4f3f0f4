//go:build linux

package verify

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// lockstepBinary builds cmd/lockstep once: the enforcer, the probes and
// the guests' init.
func lockstepBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "verify-test-bin."); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "lockstep")
		binErr = lockstepbin.BuildTo(binPath)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// hostBase is testdata's generic base with its working directory moved to
// dir (the host's /var/tmp/testing-dir may be in use by other runs).
func hostBase(t *testing.T, dir string) *policy.Policy {
	t.Helper()
	b, err := os.ReadFile("testdata/BaseLanguage-generic.cfg")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("BaseLanguage-generic.cfg", []byte(strings.ReplaceAll(string(b), "/var/tmp/testing-dir", dir)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func needHostKernel(t *testing.T) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the diagnosis run collects audit records and needs root")
	}
	abi, err := enforcer.HostABI()
	if err != nil || abi < 7 {
		t.Fatalf("Landlock ABI = %d, %v; this machine promises at least 7", abi, err)
	}
	return abi
}

// TestHereHostKernel verifies testdata's exercises on this machine's
// kernel: the two sound ones pass with their containment checks held, the
// one broken on purpose fails naming its refused write into /srv, with the
// kernel's audit record and the row that would grant it.
func TestHereHostKernel(t *testing.T) {
	abi := needHostKernel(t)
	work := filepath.Join(t.TempDir(), "work")
	p := hostBase(t, work)
	// shell-reference is the project's generic reference exercise; counting
	// and writes-outside (broken on purpose) are verify's own.
	for _, tt := range []struct {
		Name    string
		Root    string
		Verdict string
	}{{"shell-reference", "../testdata/exercises", Pass}, {"counting", "testdata/exercises", Pass}, {"writes-outside", "testdata/exercises", Fail}} {
		t.Run(tt.Name, func(t *testing.T) {
			c, err := Here(t.Context(), HereOptions{Kernel: "host", Policy: p, Exercises: tt.Root, Key: "generic",
				Exercise: tt.Name, Exe: lockstepBinary(t), WorkDir: work})
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict != tt.Verdict || c.ABI != abi || len(c.Joint) != DefaultJointRuns {
				t.Fatalf("Here = %s (%s), ABI %d, %d joint run(s); want %s after %d joint runs", c.Verdict, c.Why, c.ABI, len(c.Joint), tt.Verdict, DefaultJointRuns)
			}
			if tt.Verdict == Pass {
				// Every check of the pruner's set runs, the limits included.
				held := map[string]bool{}
				for _, ch := range c.Containment {
					if !ch.Held {
						t.Errorf("containment %s did not hold (skipped %v): %s", ch.Name, ch.Skipped, ch.Detail)
					}
					held[ch.Name] = ch.Held
				}
				for _, n := range []string{"canary /root/lockstep-prune-canary", "write into a read-only path", "connect to an unnamed loopback port",
					"bind of an ungranted port", "limit nofile", "limit nproc", "limit fsize_mb", "limit mem_mb", "limit timeout", "limit cpu"} {
					if !held[n] {
						t.Errorf("containment check %q missing or not held in %+v", n, c.Containment)
					}
				}
				return
			}
			d := c.Diagnosis
			if d == nil || len(d.Refusals) == 0 {
				t.Fatalf("diagnosis = %+v, want the refused write", d)
			}
			var found bool
			for _, r := range d.Refusals {
				if strings.Join(r.Objects, ",") == "/srv/lockstep-verify-cache" || strings.HasPrefix(strings.Join(r.Objects, ","), "/srv") {
					found = true
					if len(r.Audit) == 0 || !strings.Contains(r.Audit[0], "/srv") || len(r.Grant) == 0 {
						t.Errorf("refusal %+v: want its audit record and granting row", r)
					}
				}
			}
			if !found || !strings.Contains(c.Why, "/srv") {
				t.Errorf("Why = %q, refusals %+v; want the write into /srv named", c.Why, d.Refusals)
			}
		})
	}
}

// TestRunUnknownExercise: an --exercise name the key does not have is
// refused, naming it and the ones there are, even beside a name that
// exists (before, it was dropped without a word).
func TestRunUnknownExercise(t *testing.T) {
	p, err := policy.Parse("p.cfg", []byte("[read]\n/usr\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Host(t.Context(), HostOptions{Policy: p, Kernels: []Kernel{{Name: "host"}}, Exercises: "../testdata/exercises", Key: "generic",
		Only: []string{"shell-reference", "shell-refrence"}})
	if err == nil || !strings.Contains(err.Error(), `"shell-refrence": no such exercise of key "generic"`) || !strings.Contains(err.Error(), "there are: shell-reference") {
		t.Errorf("Run with an unknown exercise = %v; want it named with the ones there are", err)
	}
}

// TestHereTimeoutInconclusive: an exercise that waits, refused its cache,
// runs into the policy's timeout in every joint run; the cell is
// inconclusive (status 3), not failed, and no diagnosis run follows.
// Before, the time-out was a disagreement like any other: a diagnosis run,
// then fail.
func TestHereTimeoutInconclusive(t *testing.T) {
	needHostKernel(t)
	work := filepath.Join(t.TempDir(), "work")
	b, err := os.ReadFile("testdata/BaseLanguage-generic.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(strings.ReplaceAll(string(b), "/var/tmp/testing-dir", work), "timeout=60", "timeout=3")
	p, err := policy.Parse("BaseLanguage-generic.cfg", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Here(t.Context(), HereOptions{Kernel: "host", Policy: p, Exercises: "testdata/exercises", Key: "generic",
		Exercise: "waits-when-refused", Exe: lockstepBinary(t), WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	if c.Verdict != Inconclusive || !strings.Contains(c.Why, "ran out of time (3s") || c.Diagnosis != nil {
		t.Fatalf("Here = %s (%s), diagnosis %v; want %s naming the 3 s timeout, no diagnosis", c.Verdict, c.Why, c.Diagnosis != nil, Inconclusive)
	}
	for i, j := range c.Joint {
		if !j.TimedOut || j.Agrees {
			t.Errorf("joint run %d = %+v; want timed out", i+1, j)
		}
	}
	if st := status([]*Cell{{Verdict: Pass}, c}); st != StatusIndeterminate {
		t.Errorf("status with an inconclusive cell = %d, want %d", st, StatusIndeterminate)
	}
}

// sleeperExercise writes, under a new testing root, an exercise of key
// generic whose one test sleeps secs seconds, then passes.
func sleeperExercise(t *testing.T, secs int) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "generic", "sleeps")
	junit, err := os.ReadFile("testdata/exercises/generic/waits-when-refused/tests/junit.sh")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"prune.json":      `{"key": "generic", "report_globs": ["test-reports/*.xml"]}`,
		"build_script.sh": "#!/bin/bash\nset -euo pipefail\n. tests/junit.sh\ntest_sleeps() { sleep " + strconv.Itoa(secs) + "; }\njunit_run sleeps test-reports/sleeps.xml\n",
		"tests/junit.sh":  string(junit),
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestHereTimeFactor: an exercise that takes longer than the policy's
// timeout (5 s against 3 s) passes with a time factor of 4 (a guest under
// TCG): its reference and joint runs get 12 s, while the containment checks
// keep the policy's own limits (the timeout probe sleeps 3+5 s and is ended
// at 3 s; at 12 s it would not be). Without the factor (KVM, the host) the
// same cell is inconclusive, as every cell was before the factor existed.
func TestHereTimeFactor(t *testing.T) {
	needHostKernel(t)
	work := filepath.Join(t.TempDir(), "work")
	p := hostBase(t, work)
	p.Limits[policy.Timeout], p.Limits[policy.CPU] = policy.Limit{Value: 3000}, policy.Limit{Value: 2}
	root := sleeperExercise(t, 5)
	for _, tc := range []struct {
		factor  int
		verdict string
	}{{4, Pass}, {1, Inconclusive}} {
		c, err := Here(t.Context(), HereOptions{Kernel: "host", Policy: p, Exercises: root, Key: "generic", Exercise: "sleeps",
			Exe: lockstepBinary(t), WorkDir: work, TimeFactor: tc.factor})
		if err != nil {
			t.Fatal(err)
		}
		if c.Verdict != tc.verdict || max(c.TimeFactor, 1) != tc.factor {
			t.Fatalf("factor %d: Here = %s (%s), time_factor %d; want %s", tc.factor, c.Verdict, c.Why, c.TimeFactor, tc.verdict)
		}
		if tc.verdict == Inconclusive {
			if !strings.Contains(c.Why, "ran out of time (3s, the policy's timeout)") {
				t.Errorf("factor 1: Why = %q; want the policy's own 3 s", c.Why)
			}
			continue
		}
		for _, j := range c.Joint {
			if j.TimedOut || !j.Agrees {
				t.Errorf("joint run %+v; want it to agree within 12 s", j)
			}
		}
		want := map[string]string{"limit timeout": "sleep 8", "limit cpu": "spin " + strconv.FormatInt(contain.CPUSpinBound(2), 10)}
		for _, ch := range c.Containment {
			if w, ok := want[ch.Name]; ok {
				delete(want, ch.Name)
				if !ch.Held || !strings.Contains(ch.Detail, w) {
					t.Errorf("containment %s = held %v, %q; want held, %q (the policy's own limit)", ch.Name, ch.Held, ch.Detail, w)
				}
			}
		}
		if len(want) > 0 {
			t.Errorf("containment checks missing: %v", want)
		}
	}
}
