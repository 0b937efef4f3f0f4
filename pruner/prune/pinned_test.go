package prune

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/readroot"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
)

// pinnedFixture is a tree to pin, the seed directory holding its manifest
// and a kept seed, and an exercise (bash builtins only) that reads three
// files of the tree from different folders and writes a JUnit report.
type pinnedFixture struct {
	tree, seeds, kept string
	ex                *exercise.Exercise
}

func newPinnedFixture(t *testing.T, extra string) *pinnedFixture {
	t.Helper()
	base := t.TempDir()
	f := &pinnedFixture{tree: filepath.Join(base, "repo"), seeds: filepath.Join(base, "seeds"), kept: filepath.Join(base, "kept-dir")}
	files := map[string]string{
		"repo/org/a/1.0/a.pom": "a", "repo/org/b/2.0/b.pom": "b", "repo/c.txt": "c", "repo/org/unread.pom": "u",
		"kept-dir/readme": "never read by the exercise",
	}
	for p, s := range files {
		write(t, filepath.Join(base, p), s, 0o644)
	}
	m, err := readroot.Make(f.tree)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.seeds, "repo.sha256"), string(m.Render()), 0o644)
	write(t, filepath.Join(f.seeds, "kept.cfg"), "# a kept seed for the test\n\n[read]\n# a machine elsewhere reads it at start-up\n"+f.kept+"\n", 0o644)
	dir := filepath.Join(base, "exercises", "pinned", "reads-tree")
	script := "#!/bin/bash\nset -euo pipefail\nroot=" + f.tree + "\n" +
		"a=$(<\"$root/org/a/1.0/a.pom\"); b=$(<\"$root/org/b/2.0/b.pom\"); c=$(<\"$root/c.txt\")\n" +
		"[[ $a$b$c == abc ]]\n" + extra +
		"printf '<?xml version=\"1.0\"?>\\n<testsuite name=\"pinned\" tests=\"1\"><testcase classname=\"pinned\" name=\"reads_tree\"/></testsuite>\\n' > test-reports/pinned.xml\n"
	write(t, filepath.Join(dir, "build_script.sh"), script, 0o755)
	if err := os.MkdirAll(filepath.Join(dir, "test-reports"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"kept_seed": "kept.cfg", "report_globs": []string{"test-reports/*.xml"},
		"pinned_read_roots": []map[string]string{{"path": f.tree, "manifest": "repo.sha256"}}})
	write(t, filepath.Join(dir, "prune.json"), string(cfg), 0o644)
	if f.ex, err = exercise.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	return f
}

func write(t *testing.T, p, s string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

func (f *pinnedFixture) options(t *testing.T) Options {
	opts := hostOptions(t)
	opts.SeedDir, opts.SkipContainment, opts.SkipLimits = f.seeds, true, true
	opts.BaselineRuns, opts.VerificationRuns = 1, 1
	return opts
}

// TestHostPinnedAndKept prunes an exercise that reads three files of a
// pinned tree: the policy reads the tree as one [read] entry with its
// comment and nothing beneath it, and the kept seed's row (which no run
// needs) is there with its reason; the record shows the manifest verified
// at each point.
func TestHostPinnedAndKept(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	f := newPinnedFixture(t, "")
	res, err := Prune(t.Context(), f.ex, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != nil {
		t.Fatalf("aborted: %s\n%v", res.Aborted.Aborted, res.Aborted.Evidence["last_failing_log_tail"])
	}
	t.Logf("%d runs %v:\n%s", res.TotalRuns(), res.Runs, res.Cfg)
	if !res.Policy.FS[f.tree][policy.Read] || res.Policy.Comments[f.tree] != placement.PinnedComment(f.tree) {
		t.Errorf("the pinned tree %s is not one [read] entry with its comment", f.tree)
	}
	for q := range res.Policy.FS {
		if policy.Beneath(q, f.tree) {
			t.Errorf("the policy names %s beneath the pinned tree", q)
		}
	}
	if !strings.Contains(string(res.Cfg), "# pinned: [read] on the directory "+f.tree+" as one entry") {
		t.Errorf("the written policy lacks the pinned comment")
	}
	if !res.Policy.FS[f.kept][policy.Read] || !strings.Contains(res.Policy.Comments[f.kept], "a machine elsewhere reads it at start-up") {
		t.Errorf("the kept row [read] %s is missing or has lost its reason: %q", f.kept, res.Policy.Comments[f.kept])
	}
	var whens []string
	for _, e := range res.Record.Log {
		if e.Stage == "pinned read roots" {
			whens = append(whens, e.Fields["when"].(string))
		}
	}
	if got := strings.Join(whens, ", "); got != "before the first run, before the joint verification, after the last run" {
		t.Errorf("the manifest was verified %s", got)
	}
}

// TestHostPinnedTampered: a file of the pinned tree changed after its
// manifest was made aborts the prune before any run, naming the file.
func TestHostPinnedTampered(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	f := newPinnedFixture(t, "")
	tampered := filepath.Join(f.tree, "org/b/2.0/b.pom")
	write(t, tampered, "b, changed", 0o644)
	res, err := Prune(t.Context(), f.ex, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted == nil || !strings.Contains(res.Aborted.Aborted, tampered+" has SHA-256") {
		t.Fatalf("Prune with a tampered tree = %+v, want an abort naming %s", res.Aborted, tampered)
	}
	if res.TotalRuns() != 0 {
		t.Errorf("runs %v before the abort, want none", res.Runs)
	}
}

// TestHostPinnedWrite: an exercise that writes into its pinned tree gets
// no write grant there; the prune aborts.
func TestHostPinnedWrite(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	f := newPinnedFixture(t, "printf x > \"$root/org/scratch\"\n")
	res, err := Prune(t.Context(), f.ex, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted == nil {
		t.Fatalf("Prune of an exercise writing into its pinned tree gave a policy:\n%s", res.Cfg)
	}
	ev, _ := json.Marshal(res.Aborted.Evidence)
	if !strings.Contains(string(ev), "a write-class right inside the pinned read root "+f.tree+" is never granted") {
		t.Errorf("aborted (%s) without the record saying why the write was not granted: %s", res.Aborted.Aborted, ev)
	}
}

// TestKeptSeedRules: a kept seed's every row needs a reason, a seed's
// sections, and an existing target; nothing is written in /proc or /sys,
// and beneath /dev only a character device is written. Every problem is
// named at once.
func TestKeptSeedRules(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	write(t, file, "x", 0o644)
	cases := []struct{ name, src, want string }{
		{"no reason", "[read]\n" + dir + "\n", "has no comment above it"},
		{"execute", "[execute]\n# why\n" + dir + "\n", "only [read] [write] [create] [delete]"},
		{"network", "[connect]\nallow localhost:80\n[read]\n# why\n" + dir + "\n", "only [read] [write] [create] [delete]"},
		{"missing", "[read]\n# why\n" + dir + "/nope\n", "want an existing directory"},
		{"create on a file", "[create]\n# why\n" + file + "\n", "a file or device takes only [read] and [write]"},
		{"write in /proc", "[write]\n# why\n/proc/sys\n", "writes nothing on or beneath /proc"},
		{"delete in /dev", "[delete]\n# why\n/dev/shm\n", "beneath /dev a kept seed only writes to a character device"},
		{"two at once", "[read]\n" + dir + "\n[write]\n# why\n/sys/kernel\n", "has no comment above it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seeds := t.TempDir()
			write(t, filepath.Join(seeds, "k.cfg"), c.src, 0o644)
			s := &state{ex: &exercise.Exercise{Config: exercise.Config{KeptSeed: "k.cfg"}}, opts: Options{SeedDir: seeds}, because: map[search.Item][]string{}}
			_, _, err := s.keptSeed()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("keptSeed(%q) = %v, want an abort with %q", c.src, err, c.want)
			}
			if c.name == "two at once" && !strings.Contains(err.Error(), "/sys") {
				t.Errorf("keptSeed named one problem of two: %v", err)
			}
		})
	}
	seeds := t.TempDir()
	write(t, filepath.Join(seeds, "k.cfg"), "[read]\n# the reason\n"+file+"\n[write]\n# a device\n/dev/null\n", 0o644)
	s := &state{ex: &exercise.Exercise{Config: exercise.Config{KeptSeed: "k.cfg"}}, opts: Options{SeedDir: seeds}, because: map[search.Item][]string{}}
	items, comments, err := s.keptSeed()
	if err != nil || len(items) != 2 || !strings.HasSuffix(comments[file], "never minimised: the reason") {
		t.Errorf("keptSeed(good) = %v, %v, %v", items, comments, err)
	}
}
