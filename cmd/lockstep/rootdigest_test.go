package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/record"
)

// fakeRoot makes a small root whose Python lives at pyDir.
func fakeRoot(t *testing.T, pyDir string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range map[string]string{"usr/bin/python3": "python", pyDir + "/os.py": "import sys\n", "etc/os-release": "ID=debian\n"} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func imageDigest(t *testing.T, root string) string {
	t.Helper()
	code, out, errs := runCLI(t, "image", "digest", root)
	if code != cli.ExitOK {
		t.Fatalf("image digest %s = %d: %s", root, code, errs)
	}
	return strings.TrimSpace(out)
}

// setProvenanceField rewrites provenance.<key> of the JSON record at p.
func setProvenanceField(t *testing.T, p, key, val string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["provenance"].(map[string]any)[key] = val
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot maps every entry of a tree to its mode and bytes.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOrchestrateRefusesForeignRoot: a sidecar observed on a root whose
// Python is elsewhere than in the root the policy was pruned on is refused:
// exit 1, both digests named, the output tree byte-identical.
func TestOrchestrateRefusesForeignRoot(t *testing.T) {
	pruned := imageDigest(t, fakeRoot(t, "usr/lib/python3.11"))
	foreign := imageDigest(t, fakeRoot(t, "usr/lib/python3.13"))
	if pruned == foreign {
		t.Fatalf("two different roots have one digest %s", pruned)
	}
	dir := t.TempDir()
	path, core := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core")
	copyFixture(t, path)
	for _, n := range []string{"java_one.json", "java_two.json", "java_one.abi10.json", "java_two.abi10.json"} {
		setProvenanceField(t, filepath.Join(path, n), "root_digest", pruned)
	}
	if code, _, errs := runCLI(t, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core); code != cli.ExitOK {
		t.Fatalf("orchestrate of one root = %d\n%s", code, errs)
	}
	before := snapshot(t, dir)
	setProvenanceField(t, filepath.Join(path, "java_two.abi10.json"), "root_digest", foreign)
	before[filepath.Join(path, "java_two.abi10.json")] = snapshot(t, dir)[filepath.Join(path, "java_two.abi10.json")]
	code, _, errs := runCLI(t, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core)
	if code != cli.ExitFail {
		t.Fatalf("orchestrate of a foreign sidecar = %d, want %d\n%s", code, cli.ExitFail, errs)
	}
	for _, w := range []string{"root digests differ", "observed on root " + foreign, "pruned on root " + pruned} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	after := snapshot(t, dir)
	if len(after) != len(before) {
		t.Errorf("the refusal changed the set of files: %d entries, was %d", len(after), len(before))
	}
	for p, v := range before {
		if after[p] != v {
			t.Errorf("the refusal changed %s", p)
		}
	}
}

// TestPruneRecordsRootDigest: the records of an on-host prune carry the
// digest given, and a malformed one is a usage error.
func TestPruneRecordsRootDigest(t *testing.T) {
	ex, err := filepath.Abs("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	t.Setenv("LOCKSTEP_GUEST", "")
	digest := imageDigest(t, fakeRoot(t, "usr/lib/python3.11"))
	out := t.TempDir()
	args := []string{"prune", "--key", "broken", "--exercises", ex, "--out", out, "--on-host", "--skip-containment",
		"--work-dir", filepath.Join(t.TempDir(), "testing-dir")}
	if code, _, errs := runCLI(t, append(args, "--root-digest", "sha256:BAD")...); code != cli.ExitUsage || !strings.Contains(errs, "--root-digest") {
		t.Fatalf("a malformed --root-digest = %d, %s; want usage", code, errs)
	}
	if code, _, errs := runCLI(t, append(args, "--root-digest", digest)...); code != cli.ExitFail {
		t.Fatalf("prune of the broken key = %d, want %d (aborted)\n%s", code, cli.ExitFail, errs)
	}
	data, err := os.ReadFile(filepath.Join(out, "broken_failing-test.aborted.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec record.Aborted
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Provenance.RootDigest != digest {
		t.Errorf("provenance.root_digest = %q, want %q", rec.Provenance.RootDigest, digest)
	}
}
