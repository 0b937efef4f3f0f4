package orchestrate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setRootDigest sets provenance.root_digest of the record at p ("" deletes it).
func setRootDigest(t *testing.T, p, digest string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	prov, _ := m["provenance"].(map[string]any)
	if prov == nil {
		prov = map[string]any{}
		m["provenance"] = prov
	}
	if digest == "" {
		delete(prov, "root_digest")
	} else {
		prov["root_digest"] = digest
	}
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	pruneRoot = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	otherRoot = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// rootEnv is the fixture split into two observer directories, every record
// carrying pruneRoot.
func rootEnv(t *testing.T) *env {
	e := newEnv(t)
	splitKVM(t, e, 2)
	for _, stem := range []string{"java_one", "java_two", "python_basic"} {
		if _, err := os.Stat(filepath.Join(e.path, stem+".json")); err == nil {
			setRootDigest(t, filepath.Join(e.path, stem+".json"), pruneRoot)
		}
		for _, d := range e.kvm {
			if _, err := os.Stat(filepath.Join(d, stem+".abi10.json")); err == nil {
				setRootDigest(t, filepath.Join(d, stem+".abi10.json"), pruneRoot)
			}
		}
	}
	return e
}

func TestRootDigestRefusal(t *testing.T) {
	e := rootEnv(t)
	if _, err := Run(e.opts()); err != nil {
		t.Fatalf("records of one root: %v", err)
	}
	for _, tc := range []struct {
		Name, Digest, Want string
	}{
		{"another root", otherRoot, otherRoot},
		{"no digest", "", "root none"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			e := rootEnv(t)
			if _, err := Run(e.opts()); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, e.core)
			foreign := filepath.Join(e.kvm[1], "java_two.abi10.json")
			setRootDigest(t, foreign, tc.Digest)
			_, err := Run(e.opts())
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("Run = %v; want a refusal", err)
			}
			all := strings.Join(r.Problems, "\n")
			for _, w := range []string{"java_two: root digests differ", foreign, tc.Want, "java_two.json was pruned on root " + pruneRoot} {
				if !strings.Contains(all, w) {
					t.Errorf("problems =\n%s\nwant one with %q", all, w)
				}
			}
			if len(r.Problems) != 1 {
				t.Errorf("problems = %q; want one", r.Problems)
			}
			if treeHash(t, e.core) != before {
				t.Error("the refusal changed the output tree")
			}
			if s := siblings(t, e.core); len(s) != 0 {
				t.Errorf("temporaries left: %v", s)
			}
		})
	}
}

// A policy pruned on no recorded root is refused a sidecar of a known root
// as well: absence is a value, not a wildcard.
func TestRootDigestAbsentOnPruneSide(t *testing.T) {
	e := rootEnv(t)
	setRootDigest(t, filepath.Join(e.path, "java_two.json"), "")
	_, err := Run(e.opts())
	var r *Refusal
	if !errors.As(err, &r) || !strings.Contains(strings.Join(r.Problems, "\n"), "java_two.json was pruned on root none") {
		t.Fatalf("Run = %v; want a refusal naming the prune's missing digest", err)
	}
}
