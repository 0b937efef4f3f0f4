package prune

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/record"
)

// outsideMain is the program of the outside module: it imports only
// exported packages of this module and names no enforcer or probe, so
// Prune starts the program itself as both (ServeRoles).
const outsideMain = `// Command pruneone prunes one exercise: pruneone <exercise> <work dir> <out dir> <canary>.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/prune"
)

func main() {
	prune.ServeRoles()
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: pruneone <exercise> <work dir> <out dir> <canary>")
		os.Exit(2)
	}
	ex, err := exercise.ReadDir(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res, err := prune.Prune(context.Background(), ex, prune.Options{WorkDir: os.Args[2],
		Contain: prune.ContainOptions{Canaries: []string{os.Args[4]}, MaxSeconds: 1}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if res.Aborted != nil {
		fmt.Fprintln(os.Stderr, "aborted:", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
		os.Exit(1)
	}
	paths, err := res.Write(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println(p)
	}
}
`

// tinyExercise reads one file and writes one JUnit report.
var tinyExercise = map[string]string{
	"data.txt": "42\n",
	"build_script.sh": `#!/bin/bash
read -r x <data.txt
[[ $x == 42 ]] && outcome="" || outcome="<failure/>"
printf '<testsuite name="tiny"><testcase classname="tiny" name="reads_data">%s</testcase></testsuite>\n' "$outcome" >test-reports/tiny.xml
`,
}

// TestOutsideModule builds a module of its own, which reaches this one
// through a replace directive and imports only exported packages, and has
// it prune a tiny exercise with every stage on, with no lockstep CLI on
// PATH: the program is its own enforcer and containment probe.
func TestOutsideModule(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("-short: builds a program and prunes with every stage")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the outside module with")
	}
	bin := buildOutside(t, goBin)

	ex := filepath.Join(t.TempDir(), "tiny", "reads-data")
	if err := os.MkdirAll(filepath.Join(ex, "test-reports"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range tinyExercise {
		if err := os.WriteFile(filepath.Join(ex, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The canary outside /tmp: a seed may grant /tmp.
	canaries, err := os.MkdirTemp("/var/tmp", "lockstep-outside-canary-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(canaries) })
	out, canary := t.TempDir(), filepath.Join(canaries, "secret")
	cmd := exec.Command(bin, ex, filepath.Join(t.TempDir(), "testing-dir"), out, canary)
	cmd.Env = append(withoutVar(os.Environ(), "PATH"), "PATH="+straceOnly(t), "LOCKSTEP_DISPOSABLE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	stdout, err := cmd.Output()
	t.Logf("the outside program pruned in %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("the outside program: %v\n%s", err, stderr.Bytes())
	}
	paths := strings.Fields(string(stdout))
	if len(paths) != 2 || !strings.HasSuffix(paths[0], record.ConfigSuffix) {
		t.Fatalf("the outside program wrote %q, want the .cfg and the .json", paths)
	}
	checkOutsideRecord(t, paths[0], paths[1], "canary "+canary, "limit nproc")
}

// buildOutside writes the outside module into a temporary directory and
// builds it, resolving this module through the replace directive and the
// rest from the module cache (this module's go.sum vouches for them).
func buildOutside(t *testing.T, goBin string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := "go 1.26.0"
	for _, l := range strings.Split(string(goMod), "\n") {
		if strings.HasPrefix(l, "go ") {
			goLine = l
		}
	}
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/pruneone\n\n" + goLine + "\n\nrequire github.com/lockstep-sandbox/lockstep v0.0.0\n\n" +
			"replace github.com/lockstep-sandbox/lockstep => " + root + "\n",
		"go.sum":  string(goSum),
		"main.go": outsideMain,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flags, err := exec.Command(goBin, "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v", err)
	}
	bin := filepath.Join(dir, "pruneone")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(string(flags)+" -mod=mod"), "GOWORK=off", "CGO_ENABLED=0")
	start := time.Now()
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the outside module: %v\n%s", err, b)
	}
	t.Logf("built the outside module in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// straceOnly returns a PATH of one directory holding strace and nothing
// else, so no lockstep CLI can be found.
func straceOnly(t *testing.T) string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(strace, filepath.Join(dir, "strace")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func withoutVar(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// checkOutsideRecord checks that the record vouches for the policy and that
// the containment checks named want ran, through the program as the probe,
// and were refused.
func checkOutsideRecord(t *testing.T, cfgPath, recPath string, want ...string) {
	t.Helper()
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ReadExercise(recPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Vouches(cfg); err != nil {
		t.Error(err)
	}
	refused := map[string]bool{}
	for _, e := range rec.Log {
		if e.Stage != "containment" {
			continue
		}
		for _, c := range e.Fields["checks"].([]any) {
			c := c.(map[string]any)
			if c["refused"] == true {
				refused[c["name"].(string)] = true
			}
		}
	}
	t.Logf("policy:\n%s\nrefused containment checks: %v", cfg, refused)
	for _, w := range want {
		if !refused[w] {
			t.Errorf("containment check %q was not refused (refused: %v): the program did not serve as the probe (%s)", w, refused, contain.Verb)
		}
	}
}
