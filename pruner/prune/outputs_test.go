package prune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
	"github.com/lockstep-sandbox/lockstep/record"
)

// TestGuestOutputs reads the prunes made in a guest on 7.2.13
// (testdata/guest-7.2.13/README.md): each record vouches for its .cfg, was
// made on ABI 10, lists a refusal (no EPERM) behind every grant of the
// policy, and every containment check held or says why it could not run.
func TestGuestOutputs(t *testing.T) {
	cfgs, _ := filepath.Glob("testdata/guest-7.2.13/*.cfg")
	if len(cfgs) != 3 {
		t.Fatalf("found %d .cfg files, want 3", len(cfgs))
	}
	for _, c := range cfgs {
		t.Run(filepath.Base(c), func(t *testing.T) {
			data, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := record.ReadExercise(strings.TrimSuffix(c, ".cfg") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.Vouches(data); err != nil {
				t.Error(err)
			}
			if rec.Provenance.LandlockABI != 10 || rec.Provenance.Kernel != "7.2.13" {
				t.Errorf("provenance %+v, want kernel 7.2.13 with ABI 10", rec.Provenance)
			}
			p, err := policy.Parse(c, data)
			if err != nil {
				t.Fatal(err)
			}
			backed := map[string]bool{}
			for _, e := range rec.Log {
				switch e.Stage {
				case "grants":
					for _, g := range e.Fields["grants"].([]any) {
						m := g.(map[string]any)
						refs, _ := m["refusals"].([]any)
						for _, r := range refs {
							if strings.Contains(r.(string), "EPERM") {
								t.Errorf("%v rests on an EPERM: %v", m["grant"], r)
							}
						}
						if len(refs) > 0 || m["inherited_from"] != nil {
							backed[m["grant"].(string)] = true
						}
					}
				case "containment":
					for _, ch := range e.Fields["checks"].([]any) {
						m := ch.(map[string]any)
						if m["refused"] != true && m["unchecked"] == nil {
							t.Errorf("containment check %v did not hold", m["name"])
						}
					}
				}
			}
			for _, it := range search.Items(p) {
				if !backed[it.String()] {
					t.Errorf("%s has no refusal behind it in the record", it)
				}
			}
		})
	}
}
