//go:build linux

package verify

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
)

// builtLanguages are the languages lockstep ships a base for
// (docs/exercises.md, "Languages"): each must have its
// bases/BaseLanguage-<key>.cfg and no other base may be there.
var builtLanguages = []string{"c", "c-gcc", "cpp", "generic", "java-maven", "python", "r"}

// TestShippedBases runs every built language's reference exercise on this
// machine's kernel twice: unsandboxed (isolated, as verify's reference run
// is: exercise.Isolation), and under its shipped base with
// lockstep run (bases/BaseLanguage-<key>.cfg plus the exercise's own file,
// bases/exercises/<key>_<exercise>.cfg, which holds its limits). Both runs
// must be usable references (tests ran and passed) and agree. The bases
// name the production working directory; the test moves it to its own.
func TestShippedBases(t *testing.T) {
	needHostKernel(t)
	got, err := filepath.Glob("../bases/BaseLanguage-*.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, g := range got {
		keys = append(keys, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(g), "BaseLanguage-"), ".cfg"))
	}
	sort.Strings(keys)
	if strings.Join(keys, " ") != strings.Join(builtLanguages, " ") {
		t.Fatalf("bases/ holds bases for %q, want one for each of %q (make bases)", keys, builtLanguages)
	}
	for _, key := range builtLanguages {
		t.Run(key, func(t *testing.T) {
			ex := shippedExercises(t, key)
			for _, name := range ex {
				t.Run(name, func(t *testing.T) { runUnderBase(t, key, name) })
			}
		})
	}
}

// TestBasesScriptKeys: the keys make bases re-makes by default
// (scripts/bases.sh) are the languages bases/ must hold, so that a
// re-made bases/ passes TestShippedBases.
func TestBasesScriptKeys(t *testing.T) {
	b, err := os.ReadFile("../scripts/bases.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^out=\S+ keys=(\S+) `).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/bases.sh sets no default keys (a line out=… keys=…)")
	}
	// The script lists them in the order they start (the slowest first).
	keys := strings.Split(string(m[1]), ",")
	sort.Strings(keys)
	if got, want := strings.Join(keys, ","), strings.Join(builtLanguages, ","); got != want {
		t.Errorf("scripts/bases.sh re-makes the keys %s by default; bases/ must hold %s", got, want)
	}
}

// shippedExercises are the names of key's exercises with a policy in
// bases/exercises/.
func shippedExercises(t *testing.T, key string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("../bases/exercises", key+"_*.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".abi10.cfg") {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), key+"_"), ".cfg"))
		}
	}
	if len(names) == 0 {
		t.Fatalf("bases/exercises holds no policy of %s; want one per reference exercise", key)
	}
	return names
}

// runUnderBase runs the exercise unsandboxed and under its shipped base.
func runUnderBase(t *testing.T, key, name string) {
	found, err := exercise.ForKey("../testdata/exercises", key)
	if err != nil {
		t.Fatal(err)
	}
	var ex *exercise.Exercise
	for _, f := range found {
		if f.Name == name {
			if ex, err = exercise.Read(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ex == nil {
		t.Fatalf("bases/exercises/%s_%s.cfg has no reference exercise of key %s in testdata/exercises", key, name, key)
	}
	// Beside the production working directory, not in t.TempDir(): a base
	// that grants /tmp (java-maven's seed) would hold the moved one beneath
	// a wider grant, which lockstep run refuses as misleading.
	dir, err := os.MkdirTemp("/var/tmp", "lockstep-shipped-bases-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	work := filepath.Join(dir, "testing-dir")
	var configs []string
	for _, f := range []string{"BaseLanguage-" + key + ".cfg", "exercises/" + key + "_" + name + ".cfg"} {
		configs = append(configs, "--config", movedWorkDir(t, filepath.Join("../bases", f), dir, work))
	}
	program, err := refns.Open(lockstepBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer program.Close()
	opts := exercise.RunOptions{WorkDir: work, Timeout: 10 * time.Minute, Isolate: &exercise.Isolation{Program: program}}
	bare, err := ex.Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Verdict.ReferenceProblem(); err != nil {
		t.Fatalf("unsandboxed: %v (status %d); is its toolchain installed (testdata/exercises/%s/README.md)?\n%s",
			err, bare.Status, filepath.Join(ex.Family, ex.Name), bare.Log)
	}
	opts.Isolate = nil
	opts.Prefix = append(append([]string{lockstepBinary(t), "run", "-q"}, configs...), "--")
	based, err := ex.Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := based.Verdict.ReferenceProblem(); err != nil || !based.Verdict.Same(bare.Verdict) {
		t.Fatalf("under the shipped base: %v, status %d, %+v; want the unsandboxed run's verdict %+v\n%s",
			err, based.Status, based.Verdict, bare.Verdict, based.Log)
	}
	t.Logf("%s: %d tests passed unsandboxed (%v) and under its base (%v)", ex.Stem(), len(bare.Verdict.Tests),
		bare.Duration.Round(time.Millisecond), based.Duration.Round(time.Millisecond))
}

// movedWorkDir writes a copy of the policy file into dir with the
// production working directory replaced by work (the host's
// /var/tmp/testing-dir may be in use by other runs) and returns its path.
func movedWorkDir(t *testing.T, file, dir, work string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(out, []byte(strings.ReplaceAll(string(b), exercise.DefaultWorkDir, work)), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
