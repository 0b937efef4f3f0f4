package observer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/record"
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
// policy.Render) and its record with record's writers.
func fixtureFiles(t *testing.T) map[string][]byte {
	t.Helper()
	return pathSetFiles(t, filepath.Join(fixtureDir, "fixture.rules"), "fixture", "udp-fixture",
		[]record.Entry{record.MustEntry("seed", map[string]any{"name": "fixture.rules", "rows": 11})})
}

// pathSetFiles renders the .cfg and record of exercise ex of key from a
// rules file, as fixtureFiles does.
func pathSetFiles(t *testing.T, rulesFile, key, ex string, log []record.Entry) map[string][]byte {
	t.Helper()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(filepath.Base(rulesFile), rules)
	if err != nil {
		t.Fatal(err)
	}
	stem := key + "_" + ex
	p.Header = record.CfgHeader(key, ex, record.StageAll, fixtureProvenance)
	cfg := p.Render()
	dir := t.TempDir()
	if err := safefile.WriteFile(filepath.Join(dir, stem+".cfg"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := record.WriteExercise(dir, &record.Exercise{SchemaVersion: record.ExerciseSchema, Key: key,
		Exercise: ex, Stage: record.StageAll, Provenance: fixtureProvenance, CfgSHA256: record.SHA256Hex(cfg),
		Policy: record.FromPolicy(p, nil), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{stem + ".cfg": cfg, stem + ".json": js}
}

// observerPathSet holds the path set of the observer key
// (testdata/exercises/observer: proc-mounts and nofile-hang), rendered from
// its .rules files.
const observerPathSet = "testdata/path_sets/observer"

// TestObserverPathSet: the committed .cfg and records of the observer key
// are what record writes for their .rules (-update rewrites them).
func TestObserverPathSet(t *testing.T) {
	for _, ex := range []string{"proc-mounts", "nofile-hang"} {
		files := pathSetFiles(t, filepath.Join(observerPathSet, ex+".rules"), "observer", ex, []record.Entry{})
		for name, want := range files {
			p := filepath.Join(observerPathSet, name)
			if *update {
				if err := safefile.WriteFile(p, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s differs from what record writes (go test ./observer -run TestObserverPathSet -update): %v", name, err)
			}
		}
	}
}

// TestFixturePathSet: the committed .cfg and record are exactly what
// record writes for fixture.rules (go test -update rewrites them),
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
			t.Errorf("%s differs from what record writes (go test ./observer -run TestFixturePathSet -update)", name)
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
	if _, removed := policy.Narrowed(p); removed == 0 {
		t.Error("the cross-check of the fixture policy removes no grant")
	}
}
