package orchestrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// setRootDigest sets provenance.root_digest of the record at p ("" deletes it).
func setRootDigest(t *testing.T, p, digest string) {
	t.Helper()
	editRecord(t, p, func(m map[string]any) {
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
	})
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
			e.kept(t, before, "the refusal")
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

// demoPathDir is a path directory as `make demo` leaves it, from captured
// files: the committed fixture record (hand-made, no root digest) and the
// observer's record and sidecar of that fixture on the 7.2.13 pin (root
// digest of the observing host's /).
func demoPathDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "path_sets")
	copyTree(t, "../testdata/path_sets/fixture", dir, func(n string) bool { return strings.HasPrefix(n, "fixture_udp-fixture.") })
	copyTree(t, "../observer/testdata/observe-fixture-reference", dir, func(n string) bool { return strings.HasPrefix(n, "fixture_udp-fixture.abi10.") })
	return dir
}

const demoObservedRoot = "sha256:2dc8bd2871a4d39d47a148f8005fd2c740c7673e5eb75dfbd898c5f05f1f7ff9"

func TestUnknownRootRefusedByDefault(t *testing.T) {
	dir := demoPathDir(t)
	core := filepath.Join(filepath.Dir(dir), "core")
	_, err := Run(Options{Langs: []string{"fixture"}, PathDir: dir, CoreDir: core})
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("Run = %v; want a refusal", err)
	}
	if len(r.Problems) != 1 {
		t.Fatalf("problems = %q; want one", r.Problems)
	}
	for _, w := range []string{"fixture_udp-fixture: root digests differ", "observed on root " + demoObservedRoot,
		"fixture_udp-fixture.json was pruned on root none", "--allow-unknown-root"} {
		if !strings.Contains(r.Problems[0], w) {
			t.Errorf("problem = %q; want it to say %q", r.Problems[0], w)
		}
	}
	if _, err := os.Stat(core); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refusal wrote %s: %v", core, err)
	}
	if md := r.Markdown(); !strings.Contains(md, "Nothing was written. 1 problem:") {
		t.Errorf("Markdown refusal = %q; want \"1 problem:\"", md)
	}
}

func TestAllowUnknownRoot(t *testing.T) {
	dir := demoPathDir(t)
	core := filepath.Join(filepath.Dir(dir), "core")
	sum, err := Run(Options{Langs: []string{"fixture"}, PathDir: dir, CoreDir: core, AllowUnknownRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "fixture_udp-fixture.json")
	want := UnknownRoot{Exercise: "fixture_udp-fixture", Record: record,
		Beside: filepath.Join(dir, "fixture_udp-fixture.abi10.json"), BesideRoot: demoObservedRoot}
	if len(sum.UnknownRoots) != 1 || sum.UnknownRoots[0] != want {
		t.Fatalf("UnknownRoots = %+v; want [%+v]", sum.UnknownRoots, want)
	}
	if md := sum.Markdown(); !strings.Contains(md, "--allow-unknown-root") || !strings.Contains(md, record) {
		t.Errorf("Markdown summary does not name the record:\n%s", md)
	}
	for _, f := range []string{"Abi10-fixture.cfg", "exercises/fixture_udp-fixture.abi10.cfg", "exercises/fixture_udp-fixture.cfg"} {
		data, err := os.ReadFile(filepath.Join(core, f))
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Parse(f, data)
		if err != nil {
			t.Fatalf("%s does not parse: %v", f, err)
		}
		note := strings.Join(p.Header, "\n")
		if !strings.Contains(note, "--allow-unknown-root") || !strings.Contains(note, record+" has no provenance.root_digest") || !strings.Contains(note, demoObservedRoot) {
			t.Errorf("%s's header = %q; want it to name the record without a root digest", f, p.Header)
		}
		if strings.HasSuffix(f, "abi10.cfg") && (len(p.Bind) != 1 || p.Bind[0].String() != "allow 5000 udp") {
			t.Errorf("%s holds %v; want [allow 5000 udp]", f, p.Bind)
		}
	}
	base, err := os.ReadFile(filepath.Join(core, "BaseLanguage-fixture.cfg"))
	if err != nil || strings.Contains(string(base), "#") || strings.Contains(string(base), "udp") {
		t.Errorf("BaseLanguage-fixture.cfg = %q, %v; want rules only, no UDP row", base, err)
	}

	// The observation side without a digest is the same unknown.
	e := rootEnv(t)
	foreign := filepath.Join(e.kvm[1], "java_two.abi10.json")
	setRootDigest(t, foreign, "")
	o := e.opts()
	o.AllowUnknownRoot = true
	sum, err = Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.UnknownRoots) != 1 || sum.UnknownRoots[0].Record != foreign || sum.UnknownRoots[0].BesideRoot != pruneRoot {
		t.Errorf("UnknownRoots = %+v; want %s beside the prune's root", sum.UnknownRoots, foreign)
	}
}

// Two different digests are refused with --allow-unknown-root too: the
// roots are known, and differ.
func TestAllowUnknownRootRefusesOtherRoot(t *testing.T) {
	dir := demoPathDir(t)
	setRootDigest(t, filepath.Join(dir, "fixture_udp-fixture.json"), otherRoot)
	_, err := Run(Options{Langs: []string{"fixture"}, PathDir: dir, CoreDir: filepath.Join(filepath.Dir(dir), "core"), AllowUnknownRoot: true})
	var r *Refusal
	if !errors.As(err, &r) || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "pruned on root "+otherRoot) ||
		strings.Contains(r.Problems[0], "--allow-unknown-root") {
		t.Fatalf("Run = %v; want one refusal naming both roots and no way around it", err)
	}
}
