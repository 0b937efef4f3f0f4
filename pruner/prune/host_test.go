package prune

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/record"
)

var (
	buildOnce sync.Once
	binPath   string
	binErr    error
	binDir    string
)

// lockstepBinary builds cmd/lockstep once per test binary, so the pipeline
// runs behind the real enforcer (`lockstep run`).
func lockstepBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv(standInBinEnv); p != "" {
			binPath = p // built by the test that re-executed this one
			return
		}
		binDir, binErr = os.MkdirTemp("", "prune-test-bin-")
		if binErr != nil {
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

// TestMain serves the roles Prune re-executes this test binary for (the
// examples prune with the default enforcer and probe: the test binary).
func TestMain(m *testing.M) {
	ServeRoles()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// needHost skips only when this machine lacks what a host prune needs:
// Landlock and strace.
func needHost(t *testing.T) {
	t.Helper()
	featuretest.Require(t, featuretest.LandlockNetwork) // a prune needs ABI 4
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
}

func readExercise(t *testing.T, rel string) *exercise.Exercise {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("../../testdata/exercises", rel))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func hostOptions(t *testing.T) Options {
	// Canaries outside /tmp: a seed may grant /tmp, and the tests' working
	// directories live there.
	c, err := os.MkdirTemp("/var/tmp", "lockstep-prune-canaries-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(c) })
	// lockstep's own enforcer as `lockstep prune` takes it: without the
	// isolation layers that hide Landlock's refusals.
	enf := append([]string{lockstepBinary(t), enforcer.Verb}, enforcer.MeasureArgs()...)
	return Options{Enforcer: enf, WorkDir: filepath.Join(t.TempDir(), "testing-dir"),
		Contain: ContainOptions{Canaries: []string{filepath.Join(c, "srv/canary/secret"), filepath.Join(c, "root-canary")}}}
}

func TestRefusedWhenNotDisposable(t *testing.T) {
	t.Setenv("LOCKSTEP_DISPOSABLE", "")
	t.Setenv("LOCKSTEP_GUEST", "")
	if _, err := Prune(t.Context(), readExercise(t, "generic/shell-reference"), Options{}); err != ErrNotDisposable {
		t.Fatalf("Prune on an undeclared machine = %v, want ErrNotDisposable", err)
	}
}

// TestHostGeneric prunes the generic reference exercise with the real
// enforcer on this host: the result passes its joint verification, every
// grant has a refusal behind it, the record vouches for the .cfg, a second
// prune gives the same policy hash, and dropping any single grant fails.
func TestHostGeneric(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	ex := readExercise(t, "generic/shell-reference")
	opts := hostOptions(t)
	res, err := Prune(t.Context(), ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != nil {
		t.Fatalf("aborted: %s\n%v", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
	}
	t.Logf("policy:\n%s", res.Cfg)
	t.Logf("runs: %d in total %v; minimisation: %d items, %d trials, %d runs, %d skipped (reference bound %d trials, %d runs)",
		res.TotalRuns(), res.Runs, res.Minimise.Before, res.Minimise.Trials, res.Minimise.Runs, res.Minimise.Skipped,
		2*res.Minimise.Before-1, 4*res.Minimise.Before-2)
	out := t.TempDir()
	paths, err := res.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Fatalf("Write = %v, want the .cfg and the .json", paths)
	}
	cfg, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ReadExercise(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Vouches(cfg); err != nil {
		t.Error(err)
	}
	p, err := policy.Parse(paths[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Every grant has a refusal behind it (or is inherited).
	var grants []map[string]any
	for _, e := range rec.Log {
		if e.Stage == "grants" {
			for _, g := range e.Fields["grants"].([]any) {
				grants = append(grants, g.(map[string]any))
			}
		}
	}
	if len(grants) == 0 {
		t.Fatal("the record has no grants entry")
	}
	for _, g := range grants {
		refs, _ := g["refusals"].([]any)
		if len(refs) == 0 && g["inherited_from"] == nil {
			t.Errorf("grant %v has no refusal behind it", g["grant"])
		}
		for _, r := range refs {
			if strings.Contains(r.(string), "EPERM") {
				t.Errorf("grant %v rests on an EPERM: %v", g["grant"], r)
			}
		}
	}

	// The same exercise pruned again gives the same policy.
	opts2 := opts
	opts2.SkipContainment = true
	res2, err := Prune(t.Context(), ex, opts2)
	if err != nil || res2.Aborted != nil {
		t.Fatalf("second prune: %v %v", err, res2.Aborted)
	}
	if h1, h2 := p.Hash(), res2.Policy.Hash(); h1 != h2 {
		t.Errorf("two prunes differ: %s vs %s\n%s", h1, h2, policy.Diff(p, res2.Policy))
	}
	minimality(t, ex, p, opts)
}

// minimality drops each grant of p in turn and runs the exercise behind the
// enforcer: every such run must differ from the reference. A grant the
// hierarchy rule puts back (an ancestor holds it) is not a grant of its own.
func minimality(t *testing.T, ex *exercise.Exercise, p *policy.Policy, opts Options) {
	t.Helper()
	ref, err := ex.Run(t.Context(), exercise.RunOptions{WorkDir: opts.WorkDir})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	checked := 0
	for i, it := range searchItems(p) {
		q := dropItem(p, i)
		n, err := q.NormaliseHierarchy()
		if err != nil {
			t.Fatal(err)
		}
		if n.Hash() == p.Hash() {
			t.Logf("%s: put back by the hierarchy rule", it)
			continue
		}
		cfg := filepath.Join(dir, "drop.cfg")
		if err := os.WriteFile(cfg, n.Render(), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := ex.Run(t.Context(), exercise.RunOptions{WorkDir: opts.WorkDir,
			Prefix: append(append([]string(nil), opts.Enforcer...), "--config", cfg, "--")})
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if res.Verdict.Same(ref.Verdict) {
			t.Errorf("without %s the exercise still passes: the policy is not minimal", it)
		}
	}
	if checked == 0 {
		t.Error("minimality: no grant was checked")
	}
	t.Logf("minimality: each of %d grants is needed", checked)
}

// TestHostBrokenAborts: an exercise whose own test fails aborts with an
// abort record and writes no .cfg (a stale one is removed).
func TestHostBrokenAborts(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	ex := readExercise(t, "broken/failing-test")
	res, err := Prune(t.Context(), ex, hostOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted == nil || res.Policy != nil || res.Cfg != nil {
		t.Fatalf("Prune(broken) = policy %v, aborted %v; want an abort and no policy", res.Policy, res.Aborted)
	}
	if !strings.Contains(res.Aborted.Aborted, "fails its own tests") {
		t.Errorf("abort reason %q, want the reference failing its own tests", res.Aborted.Aborted)
	}
	out := t.TempDir()
	stale := filepath.Join(out, ex.Stem()+".cfg")
	if err := os.WriteFile(stale, []byte("[read]\n/usr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := res.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || !strings.HasSuffix(paths[0], ".aborted.json") {
		t.Errorf("Write = %v, want only the .aborted.json", paths)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale .cfg survived the abort: %v", err)
	}
	if _, err := record.ReadAborted(paths[0]); err != nil {
		t.Error(err)
	}
	if res.Runs["baseline"] != 1 || res.TotalRuns() != 1 {
		t.Errorf("runs %v: want the one baseline run that showed the failure", res.Runs)
	}
}

// TestHostPython prunes the python reference exercise on this host: it gets
// a policy (with its record vouching for it) whose every grant has a refusal
// behind it. (c/make-reference does not converge without a seed for gcc's
// random /tmp names; see docs/prune.md.)
func TestHostPython(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("-short: each prune takes minutes")
	}
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	for _, rel := range []string{"python/pytest-reference"} {
		t.Run(rel, func(t *testing.T) {
			ex := readExercise(t, rel)
			res, err := Prune(t.Context(), ex, hostOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if res.Aborted != nil {
				t.Fatalf("aborted: %s\n%v", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
			}
			t.Logf("%s in %d runs %v:\n%s", res.Policy.Hash(), res.TotalRuns(), res.Runs, res.Cfg)
			paths, err := res.Write(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			rec, err := record.ReadExercise(paths[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.Vouches(res.Cfg); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestHostCWithSeed prunes the c reference exercise, whose prune.json names
// the seed c.cfg shipped with lockstep (gcc's random /tmp names need it;
// without it the prune aborts, which TestHostCWithoutSeed shows).
func TestHostCWithSeed(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("-short: a prune takes minutes")
	}
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	ex := readExercise(t, "c/make-reference")
	if ex.Config.Seed != "c.cfg" {
		t.Fatalf("c/make-reference names seed %q, want c.cfg", ex.Config.Seed)
	}
	opts := hostOptions(t)
	res, err := Prune(t.Context(), ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != nil {
		t.Fatalf("aborted: %s\n%v", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
	}
	t.Logf("%s in %d runs %v:\n%s", res.Policy.Hash(), res.TotalRuns(), res.Runs, res.Cfg)
	if !res.Policy.FS[opts.WorkDir+"/assignment"][policy.Execute] {
		t.Errorf("no [execute] on the compiled-programs directory: the tests run what they compile")
	}
}

func TestHostCWithoutSeed(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	orig := readExercise(t, "c/make-reference")
	dir := filepath.Join(t.TempDir(), "c", "make-reference")
	if err := exercise.FreshCopy(orig.Dir, dir); err != nil {
		t.Fatal(err)
	}
	cfg := `{"key": "c", "report_globs": ["test-reports/*.xml"], "runs_compiled_programs": true, "compiled_programs_directory": "assignment"}`
	if err := os.WriteFile(filepath.Join(dir, "prune.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := hostOptions(t)
	opts.SkipContainment = true
	res, err := Prune(t.Context(), ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted == nil || !strings.Contains(res.Aborted.Aborted, "without an attributable denial") {
		t.Fatalf("Prune(c without a seed) = %v; want the abort: gcc's /tmp names are never granted", res.Aborted)
	}
}
