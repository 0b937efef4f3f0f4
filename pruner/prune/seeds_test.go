package prune

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
)

func TestBuiltinSeeds(t *testing.T) {
	names := BuiltinSeeds()
	if len(names) == 0 {
		t.Fatal("no seeds are embedded")
	}
	for _, n := range names {
		p, err := readSeed("", n)
		if err != nil {
			t.Fatalf("seed %s: %v", n, err)
		}
		if len(p.FS) == 0 {
			t.Errorf("seed %s grants nothing", n)
		}
	}
	if _, err := readSeed("", "nope.cfg"); err == nil || !strings.Contains(err.Error(), "c.cfg") {
		t.Errorf("readSeed(nope.cfg) = %v; want an error listing the shipped seeds", err)
	}
}

func TestSeedFromDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := readSeed(dir, "c.cfg"); err == nil {
		t.Error("readSeed from an empty directory found c.cfg; --seeds must replace the shipped seeds")
	}
	p, err := readSeed("seeds", "c.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !p.FS["/tmp"][policy.Write] {
		t.Errorf("c.cfg does not grant write on /tmp: %v", p.FS)
	}
}

// TestExerciseSeedsShipped: every seed and kept seed a reference exercise's
// prune.json names is shipped, so that its prune never aborts for a missing
// seed, and so is each seed Phobos's own exercises name for the languages
// lockstep builds (r.cfg, c.cfg, cpp.cfg, java.cfg).
func TestExerciseSeedsShipped(t *testing.T) {
	shipped := map[string]bool{}
	for _, n := range BuiltinSeeds() {
		shipped[n] = true
	}
	want := map[string]string{"r.cfg": "Phobos's r", "c.cfg": "Phobos's c and c-gcc", "cpp.cfg": "Phobos's cpp", "java.cfg": "Phobos's java-maven"}
	found, err := exercise.Discover("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		ex, err := exercise.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{ex.Config.Seed, ex.Config.KeptSeed} {
			if s != "" {
				want[s] = ex.Family + "/" + ex.Name
			}
		}
	}
	for name, by := range want {
		if !shipped[name] {
			t.Errorf("%s names the seed %s, which is not shipped (pruner/prune/seeds/)", by, name)
		}
	}
}
