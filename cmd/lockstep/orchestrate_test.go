package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func copyFixture(t *testing.T, dst string) {
	t.Helper()
	src := "../../testdata/orchestrate/fixture"
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOrchestrateVerb(t *testing.T) {
	dir := t.TempDir()
	path, core, md := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core"), filepath.Join(dir, "summary.md")
	copyFixture(t, path)

	code, out, errs := runCLI(t, "orchestrate", "--langs", "java, python", "--path-dir", path, "--core-dir", core, "--json", "--summary", md)
	if code != exitOK {
		t.Fatalf("orchestrate = %d\n%s", code, errs)
	}
	var doc struct {
		Schema    int  `json:"schema_version"`
		Refused   bool `json:"refused"`
		Languages []struct {
			Name      string   `json:"name"`
			ABI10Rows []string `json:"abi10_rows"`
			Exercises []struct {
				Name string `json:"name"`
			} `json:"exercises"`
		} `json:"languages"`
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json output is not one JSON document: %v\n%s", err, out)
	}
	if doc.Schema != 1 || doc.Refused || len(doc.Languages) != 2 || doc.Languages[0].Name != "java" ||
		len(doc.Languages[0].Exercises) != 2 || len(doc.Languages[0].ABI10Rows) != 1 || len(doc.Files) != 14 || doc.Warnings == nil {
		t.Fatalf("summary = %+v", doc)
	}
	mdText, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(mdText), "| java | 2 |") || !strings.Contains(string(mdText), "`allow 5000 udp`") {
		t.Fatalf("Markdown summary = %q, %v", mdText, err)
	}

	// A refusal: exit 1, every problem on stderr, JSON says refused, the
	// Markdown summary says nothing was written.
	if err := os.WriteFile(filepath.Join(path, "java_x.aborted.json"), []byte(`{"aborted": "flaky reference"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core, "--json", "--summary", md)
	if code != exitFail || !strings.Contains(errs, "java_x was aborted: flaky reference") || !strings.Contains(errs, "nothing was written") {
		t.Fatalf("refused orchestrate = %d\n%s", code, errs)
	}
	var ref struct {
		Refused  bool     `json:"refused"`
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &ref); err != nil || !ref.Refused || len(ref.Problems) != 1 {
		t.Fatalf("refusal JSON = %q, %v", out, err)
	}
	if mdText, _ = os.ReadFile(md); !strings.Contains(string(mdText), "## lockstep orchestrate: refused") {
		t.Fatalf("refusal Markdown missing: %q", mdText)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"orchestrate", "--langs", "java"}, "are required"},
		{[]string{"orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core, "extra"}, "unexpected arguments"},
	} {
		if code, _, errs := runCLI(t, tc.args...); code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("lockstep %v = %d %q; want usage error with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestOrchestrateKVMDirTwice: `--kvm-dir kvmA --kvm-dir ./kvmA/` merged as
// "the sidecars of 2 observer runs agreed". It is a usage error now,
// naming both spellings.
func TestOrchestrateKVMDirTwice(t *testing.T) {
	d := t.TempDir()
	kvm := filepath.Join(d, "kvmA")
	if err := os.Mkdir(kvm, 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	code := run(t.Context(), []string{"orchestrate", "--langs", "java", "--path-dir", d, "--core-dir", filepath.Join(d, "core"), "--kvm-dir", kvm, "--kvm-dir", kvm + "/./"}, &stdio{out: &out, err: &errb})
	if code != exitUsage || !strings.Contains(errb.String(), "--kvm-dir "+kvm+" and --kvm-dir "+kvm+"/./ are one directory") {
		t.Errorf("orchestrate with one KVM directory twice = %d, stderr %q; want 2 naming both spellings", code, errb.String())
	}
}

// The demo's merge from captured files: the committed fixture record (no
// root digest) and the observer's record and sidecar of it.
func TestOrchestrateAllowUnknownRoot(t *testing.T) {
	dir := t.TempDir()
	path, core := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../testdata/path_sets/fixture/fixture_udp-fixture.cfg", "../../testdata/path_sets/fixture/fixture_udp-fixture.json",
		"../../observer/testdata/observe-fixture-reference/fixture_udp-fixture.abi10.cfg", "../../observer/testdata/observe-fixture-reference/fixture_udp-fixture.abi10.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := runCLI(t, "orchestrate", "--langs", "fixture", "--path-dir", path, "--core-dir", core)
	if code != exitFail || !strings.Contains(errs, "pruned on root none") || !strings.Contains(errs, "--allow-unknown-root") {
		t.Fatalf("orchestrate without --allow-unknown-root = %d\n%s", code, errs)
	}
	code, _, errs = runCLI(t, "orchestrate", "--langs", "fixture", "--path-dir", path, "--core-dir", core, "--allow-unknown-root")
	if code != exitOK || !strings.Contains(errs, "fixture_udp-fixture.json has no root digest; merged by --allow-unknown-root") {
		t.Fatalf("orchestrate --allow-unknown-root = %d\n%s", code, errs)
	}
	abi10, err := os.ReadFile(filepath.Join(core, "Abi10-fixture.cfg"))
	if err != nil || !strings.HasSuffix(string(abi10), "\n[bind]\nallow 5000 udp\n") {
		t.Fatalf("Abi10-fixture.cfg = %q, %v", abi10, err)
	}
}
