package observer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/pruner/record"
)

var update = flag.Bool("update", false, "rewrite testdata/path_sets/fixture from fixture.rules")

// fixtureDir holds the default-prune policy of the udp-fixture exercise and
// its schema-2 record; fixture.rules is the hand-checked rule text (see
// README.md there for how it was made).
const fixtureDir = "../testdata/path_sets/fixture"

// fixtureProvenance is the host the rules were checked on (README.md).
var fixtureProvenance = record.Provenance{Pruner: record.PrunerName, Kernel: "6.18.44-fc-v657", Architecture: "x86_64",
	LandlockABI: 7, UID: 0, Strace: "strace -- version 6.1", Date: "2026-11-29T09:35:00Z"}

// fixtureFiles renders the fixture's .cfg (header by record.CfgHeader, body
// policy.Render) and its record with pruner/record's writers.
func fixtureFiles(t *testing.T) map[string][]byte {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(fixtureDir, "fixture.rules"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("fixture.rules", rules)
	if err != nil {
		t.Fatal(err)
	}
	p.Header = record.CfgHeader("fixture", "udp-fixture", record.StageAll, fixtureProvenance)
	cfg := p.Render()
	dir := t.TempDir()
	if err := safefile.WriteFile(filepath.Join(dir, "fixture_udp-fixture.cfg"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := record.WriteExercise(dir, &record.Exercise{SchemaVersion: record.ExerciseSchema, Key: "fixture",
		Exercise: "udp-fixture", Stage: record.StageAll, Provenance: fixtureProvenance, CfgSHA256: record.SHA256Hex(cfg),
		Policy: record.FromPolicy(p, nil),
		Log:    []record.Entry{record.MustEntry("seed", map[string]any{"name": "fixture.rules", "rows": len(p.FS)})}})
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"fixture_udp-fixture.cfg": cfg, "fixture_udp-fixture.json": js}
}

// TestFixturePathSet: the committed .cfg and record are exactly what
// pruner/record writes for fixture.rules (go test -update rewrites them),
// the record vouches for the .cfg, and the policy lacks the UDP row.
func TestFixturePathSet(t *testing.T) {
	for name, want := range fixtureFiles(t) {
		p := filepath.Join(fixtureDir, name)
		if *update {
			if err := safefile.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what pruner/record writes (go test ./observer -run TestFixturePathSet -update)", name)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(fixtureDir, "fixture_udp-fixture.cfg"))
	r, err := record.ReadExercise(filepath.Join(fixtureDir, "fixture_udp-fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Vouches(cfg); err != nil {
		t.Error(err)
	}
	p, err := policy.Parse("fixture_udp-fixture.cfg", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Bind {
		if b.Transport == policy.UDP {
			t.Errorf("the fixture policy holds %v; the observer must find the UDP row itself", b)
		}
	}
	if _, removed := Narrowed(p); removed == 0 {
		t.Error("the cross-check of the fixture policy removes no grant")
	}
}
