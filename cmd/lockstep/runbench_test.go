package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// floorBinary compiles testdata/floor.c with cc into the cache (once per
// source) and returns its path; "" when there is no cc.
func floorBinary(b *testing.B) string {
	src, err := os.ReadFile("testdata/floor.c")
	if err != nil {
		b.Fatal(err)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		b.Logf("no cc: the floor is not measured")
		return ""
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(src)
	bin := filepath.Join(dir, "lockstep", "bench", "floor-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		b.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	if out, err := exec.Command(cc, "-O2", "-o", tmp, "testdata/floor.c").CombinedOutput(); err != nil {
		b.Fatalf("cc floor.c: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		b.Fatal(err)
	}
	return bin
}

// goFloorBinary builds the smallest Go program (main exits 0) the way
// lockstep is built, and returns its path: the Go runtime's own start-up,
// which no Go enforcer can go below.
func goFloorBinary(b *testing.B) string {
	dir := b.TempDir()
	files := map[string]string{
		"go.mod":  "module gofloor\n\ngo 1.24\n",
		"main.go": "package main\n\nfunc main() {}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", "gofloor", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build (the Go floor): %v\n%s", err, out)
	}
	return filepath.Join(dir, "gofloor")
}

// floorArgv is the floor's command line for the ruleset `lockstep run`
// applies for cfg on this kernel, running argv.
func floorArgv(b *testing.B, floor, cfg string, argv ...string) []string {
	p, err := policy.Load("", []string{cfg})
	if err != nil {
		b.Fatal(err)
	}
	prep, err := enforcer.Prepare(enforcer.Options{Policy: p, Command: argv})
	if err != nil {
		b.Fatal(err)
	}
	rs := prep.Ruleset
	if len(rs.Ports) > 0 || rs.Flags != 0 {
		b.Fatalf("the floor takes path rules only, no flags: %+v", rs)
	}
	out := []string{floor, fmt.Sprint(rs.HandledFS), fmt.Sprint(rs.HandledNet), fmt.Sprint(rs.Scoped)}
	for _, r := range rs.Paths {
		out = append(out, fmt.Sprintf("%d:%s", r.Access, r.Path))
	}
	return append(append(out, "--"), argv...)
}

// BenchmarkRunTrue measures the enforcer's start-up overhead: `lockstep run
// -q --config p.cfg -- /usr/bin/true` against a bare /usr/bin/true and the
// floor (testdata/floor.c: the same Landlock ruleset built, restricted and
// exec'd by a C program, nothing else), each started from this process,
// alternating for rounds, medians. Reported: the medians, overhead-ms
// (ours minus bare; goal: 3 at most) and x-floor (ours over the floor; goal:
// 2 at most); and, to tell the enforcer's own work from the Go runtime's
// start-up, `lockstep help` (one start of the same binary, no enforcement)
// as go-start-ms, and the same run with an rlimit, which takes the
// re-executed child, as reexec-ms; and the smallest Go program's start-up as
// go-floor-ms. `lockstep run --exec` (lockstep becomes the command) is
// exec-ms, with exec-overhead-ms and exec-x-floor.
func BenchmarkRunTrue(b *testing.B) {
	bin := lockstepbin.Build(b)
	cfg := filepath.Join(b.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	// An rlimit makes the enforcer take the re-executed child.
	cfgRe := filepath.Join(b.TempDir(), "re.cfg")
	if err := os.WriteFile(cfgRe, []byte(truePolicy+"[limits]\nnofile=1024\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	arms := []struct {
		unit string
		argv []string
	}{
		{"bare-ms", []string{"/usr/bin/true"}},
		{"lockstep-ms", []string{bin, "run", "-q", "--config", cfg, "--", "/usr/bin/true"}},
		{"exec-ms", []string{bin, "run", "-q", "--exec", "--config", cfg, "--", "/usr/bin/true"}},
		{"go-start-ms", []string{bin, "help"}},
		{"go-floor-ms", []string{goFloorBinary(b)}},
		{"reexec-ms", []string{bin, "run", "-q", "--config", cfgRe, "--", "/usr/bin/true"}},
	}
	if floor := floorBinary(b); floor != "" {
		arms = append(arms, struct {
			unit string
			argv []string
		}{"floor-ms", floorArgv(b, floor, cfg, "/usr/bin/true")})
	}
	const rounds = 101
	times := make([][]time.Duration, len(arms))
	b.ReportAllocs()
	for b.Loop() {
		for range rounds {
			for i, a := range arms {
				t0 := time.Now()
				if out, err := exec.Command(a.argv[0], a.argv[1:]...).CombinedOutput(); err != nil {
					b.Fatalf("%q: %v\n%s", a.argv, err, out)
				}
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	med := map[string]float64{}
	for i, a := range arms {
		slices.Sort(times[i])
		med[a.unit] = float64(times[i][len(times[i])/2].Microseconds()) / 1000
		b.ReportMetric(med[a.unit], a.unit)
	}
	b.ReportMetric(med["lockstep-ms"]-med["bare-ms"], "overhead-ms")
	b.ReportMetric(med["lockstep-ms"]/med["bare-ms"], "x-bare")
	b.ReportMetric(med["exec-ms"]-med["bare-ms"], "exec-overhead-ms")
	if f, ok := med["floor-ms"]; ok {
		b.ReportMetric(med["lockstep-ms"]/f, "x-floor")
		b.ReportMetric(med["exec-ms"]/f, "exec-x-floor")
	}
}

// benchObserveRunsS is runs-host-s in testdata/bench-observe-output.txt.
const benchObserveRunsS = "79.95"

// TestBenchRatios runs scripts/bench-ratios.sh, the end of `make bench`, on
// the output of a real run (testdata/bench-output.txt, its header says how
// it was made): every comparison gets its RATIO line with the value the
// benchmark reported, and one the output lacks says n/a.
func TestBenchRatios(t *testing.T) {
	ratios := func(file string) (map[string]string, string) {
		out, err := exec.Command("../../scripts/bench-ratios.sh", file).Output()
		if err != nil {
			t.Fatalf("bench-ratios.sh %s: %v\n%s", file, err, out)
		}
		got := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) >= 4 && f[0] == "RATIO" && strings.HasPrefix(f[3], "(") {
				got[f[1]] = f[2]
			}
		}
		return got, string(out)
	}
	want := map[string]string{
		"boot-vs-virtme-ng-cpu":      "31.80",
		"boot-vs-virtme-ng-wall":     "16.40",
		"boot-vs-virtme-ng-pin-cpu":  "9.04",
		"boot-vs-virtme-ng-pin-wall": "8.98",
		"boot-vs-reference-cpu":      "5.609",
		"run-overhead-ms":            "7.551",
		"run-vs-floor":               "5.155",
		"run-exec-overhead-ms":       "5.148",
		"run-exec-vs-floor":          "3.697",
		// That run's BenchmarkObserveGuest predates runs-host-s.
		"observe-fixture-runs-s": "n/a",
	}
	got, out := ratios("testdata/bench-output.txt")
	// A later BenchmarkObserveGuest line (testdata/bench-observe-output.txt).
	if obs, out := ratios("testdata/bench-observe-output.txt"); obs["observe-fixture-runs-s"] != benchObserveRunsS {
		t.Errorf("RATIO observe-fixture-runs-s = %q, want %q\n%s", obs["observe-fixture-runs-s"], benchObserveRunsS, out)
	}
	// The quiet run of docs/performance.md's table: the script, run again
	// on that make bench's lines, prints the RATIO lines it printed then.
	quiet, quietOut := ratios("testdata/bench-quiet-de2d3e5.txt")
	printed, err := os.ReadFile("testdata/bench-quiet-de2d3e5.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(quietOut, "RATIO run-vs-floor 4.208 ") || len(quiet) != len(want) {
		t.Errorf("bench-quiet-de2d3e5.txt: %d RATIO lines, want %d with run-vs-floor 4.208:\n%s", len(quiet), len(want), quietOut)
	}
	for _, l := range strings.Split(quietOut, "\n") {
		if strings.HasPrefix(l, "RATIO ") && !strings.Contains(string(printed), l+"\n") {
			t.Errorf("bench-ratios.sh now prints %q, which that make bench did not", l)
		}
	}
	none, noneOut := ratios(os.DevNull)
	for name, value := range want {
		if got[name] != value {
			t.Errorf("RATIO %s = %q, want %q\n%s", name, got[name], value, out)
		}
		if none[name] != "n/a" {
			t.Errorf("on empty output RATIO %s = %q, want n/a\n%s", name, none[name], noneOut)
		}
	}
	if len(got) != len(want) || len(none) != len(want) {
		t.Errorf("%d and %d RATIO lines, want %d:\n%s", len(got), len(none), len(want), out)
	}
}
