package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
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
	if code != cli.ExitOK {
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
	if code != cli.ExitFail || !strings.Contains(errs, "java_x was aborted: flaky reference") || !strings.Contains(errs, "nothing was written") {
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
		if code, _, errs := runCLI(t, tc.args...); code != cli.ExitUsage || !strings.Contains(errs, tc.want) {
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
	code := run(t.Context(), []string{"orchestrate", "--langs", "java", "--path-dir", d, "--core-dir", filepath.Join(d, "core"), "--kvm-dir", kvm, "--kvm-dir", kvm + "/./"}, &cli.Stdio{Out: &out, Err: &errb})
	if code != cli.ExitUsage || !strings.Contains(errb.String(), "--kvm-dir "+kvm+" and --kvm-dir "+kvm+"/./ are one directory") {
		t.Errorf("orchestrate with one KVM directory twice = %d, stderr %q; want 2 naming both spellings", code, errb.String())
	}
}

// demoPathSets is make demo's path directory from captured files: the
// committed fixture record (no root digest) and the observer's record and
// sidecar of it; and an output directory beside it.
func demoPathSets(t *testing.T) (path, core string) {
	t.Helper()
	dir := t.TempDir()
	path, core = filepath.Join(dir, "path_sets"), filepath.Join(dir, "core")
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
	return path, core
}

// The demo's merge: refused without --allow-unknown-root, which the
// refusal names; merged with it.
func TestOrchestrateAllowUnknownRoot(t *testing.T) {
	path, core := demoPathSets(t)
	code, _, errs := runCLI(t, "orchestrate", "--langs", "fixture", "--path-dir", path, "--core-dir", core)
	if code != cli.ExitFail || !strings.Contains(errs, "pruned on root none") || !strings.Contains(errs, "--allow-unknown-root") {
		t.Fatalf("orchestrate without --allow-unknown-root = %d\n%s", code, errs)
	}
	code, _, errs = runCLI(t, "orchestrate", "--langs", "fixture", "--path-dir", path, "--core-dir", core, "--allow-unknown-root")
	if code != cli.ExitOK || !strings.Contains(errs, "fixture_udp-fixture.json has no root digest; merged by --allow-unknown-root") {
		t.Fatalf("orchestrate --allow-unknown-root = %d\n%s", code, errs)
	}
	abi10, err := os.ReadFile(filepath.Join(core, "Abi10-fixture.cfg"))
	if err != nil || !strings.HasSuffix(string(abi10), "\n[bind]\nallow 5000 udp\n") {
		t.Fatalf("Abi10-fixture.cfg = %q, %v", abi10, err)
	}
}

// Counts of one read in the singular: a refusal with one problem, a merge of
// one exercise with one ABI-10 row, a policy with one problem.
func TestVerbSummariesPlural(t *testing.T) {
	path, core := demoPathSets(t)
	code, _, errs := runCLI(t, "orchestrate", "--langs", "fixture", "--path-dir", path, "--core-dir", core)
	if code != cli.ExitFail || !strings.Contains(errs, "refused (1 problem); nothing was written") {
		t.Errorf("orchestrate refused = %d; want \"refused (1 problem)\" in\n%s", code, errs)
	}
	code, out, errs := runCLI(t, "orchestrate", "--langs", "fixture", "--path-dir", path, "--core-dir", core, "--allow-unknown-root")
	if code != cli.ExitOK || !strings.Contains(out, "fixture: 1 exercise, base 15 rows, 1 ABI-10 row, sha256:") {
		t.Errorf("orchestrate = %d; want \"fixture: 1 exercise, base 15 rows, 1 ABI-10 row\" in\n%s%s", code, out, errs)
	}
	bad := filepath.Join(t.TempDir(), "bad.cfg")
	if err := os.WriteFile(bad, []byte("[read]\nrelative\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "policy", "check", bad)
	if code != cli.ExitFail || !strings.Contains(out, bad+": 1 problem\n") {
		t.Errorf("policy check = %d; want \"%s: 1 problem\" in\n%s", code, bad, out)
	}
}

// The BasePhobos.cfg warning is printed once, not also by the log.
func TestOrchestrateWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	path, core := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core")
	copyFixture(t, path)
	// python may execute what java may write: no BasePhobos.cfg.
	cfgPath := filepath.Join(path, "python_basic.cfg")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "[execute]\n", "[execute]\n/tmp/gradle/native\n", 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	recPath := filepath.Join(path, "python_basic.json")
	var rec map[string]any
	if data, err = os.ReadFile(recPath); err != nil || json.Unmarshal(data, &rec) != nil {
		t.Fatalf("read %s: %v", recPath, err)
	}
	sum := sha256.Sum256([]byte(cfg))
	rec["cfg_sha256"] = hex.EncodeToString(sum[:])
	if data, err = json.Marshal(rec); err != nil || os.WriteFile(recPath, data, 0o644) != nil {
		t.Fatalf("write %s: %v", recPath, err)
	}
	code, _, errs := runCLI(t, "orchestrate", "--langs", "java,python", "--path-dir", path, "--core-dir", core)
	if n := strings.Count(errs, "BasePhobos.cfg is not written"); code != cli.ExitOK || n != 1 {
		t.Fatalf("orchestrate = %d, the warning %d times; want it once:\n%s", code, n, errs)
	}
	if strings.Contains(errs, "more overlap") {
		t.Errorf("one overlap is told as more: %s", errs)
	}
}
