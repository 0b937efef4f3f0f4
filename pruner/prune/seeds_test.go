package prune

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
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
