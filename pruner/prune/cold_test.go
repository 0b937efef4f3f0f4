package prune

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
)

// cacheExercise passes when it reads 42 from input, or, without reading
// anything, when cache exists; every run tries to write cache (outside
// the working directory), and a sandboxed run that may not is not bothered.
func cacheExercise(t *testing.T, input, cache string) *exercise.Exercise {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache", "warm")
	write(t, filepath.Join(dir, "build_script.sh"), fmt.Sprintf(`#!/bin/bash
set -u
outcome="<failure/>"
if [[ -e %[2]s ]]; then
	outcome=""
elif read -r x <%[1]s && [[ $x == 42 ]]; then
	outcome=""
fi
mkdir -p %[3]s 2>/dev/null && : >%[2]s 2>/dev/null
printf '<testsuite name="cache"><testcase classname="cache" name="reads_input">%%s</testcase></testsuite>\n' "$outcome" >test-reports/cache.xml
`, input, cache, filepath.Dir(cache)), 0o755)
	write(t, filepath.Join(dir, "test-reports", ".keep"), "", 0o644)
	cfg, _ := json.Marshal(map[string]any{"report_globs": []string{"test-reports/*.xml"}})
	write(t, filepath.Join(dir, "prune.json"), string(cfg), 0o644)
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestHostColdCache: the first baseline run writes a cache file outside
// the working directory, which would let every later run pass without
// reading its input. Each run starts cold, so the sandboxed runs are
// refused the read and the policy grants it; the cache is not on the host
// afterwards. With the runs sharing one tree, the policy had no grant for
// the input at all.
func TestHostColdCache(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	input := filepath.Join(t.TempDir(), "input")
	write(t, input, "42\n", 0o644)
	cacheDir, err := os.MkdirTemp("/var/tmp", "lockstep-cold-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cacheDir) })
	if err := os.Remove(cacheDir); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(cacheDir, "cache")
	opts := hostOptions(t)
	opts.SkipContainment, opts.SkipLimits = true, true
	opts.BaselineRuns, opts.VerificationRuns = 2, 1
	res, err := Prune(t.Context(), cacheExercise(t, input, cache), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != nil {
		t.Fatalf("aborted: %s\n%v", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
	}
	granted := false
	for p, secs := range res.Policy.FS {
		if secs[policy.Read] && (p == input || policy.Beneath(input, p)) {
			granted = true
		}
	}
	if !granted {
		t.Errorf("the policy does not grant [read] on %s: a run passed through the cache a baseline run left\n%s", input, res.Cfg)
	}
	if _, err := os.Lstat(cacheDir); err == nil {
		t.Errorf("%s exists on the host after the prune: a run wrote outside its working directory", cacheDir)
	}
}
