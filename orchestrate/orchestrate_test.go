package orchestrate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/orchestrate/golden from the fixture's merge")

const (
	fixtureDir = "../testdata/orchestrate/fixture"
	goldenDir  = "../testdata/orchestrate/golden"
)

// copyTree copies the regular files of src into dst (created).
func copyTree(t testing.TB, src, dst string, keep func(name string) bool) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || (keep != nil && !keep(e.Name())) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// treeHash hashes every entry of a tree: paths, types, modes and contents.
func treeHash(t testing.TB, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", rel, info.Mode())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%x\n", sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readTree maps each regular file's slash path to its bytes.
func readTree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// siblings lists the entries beside dir whose names start with "."+base (temporaries).
func siblings(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".lockstep-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type env struct {
	path, core string
	kvm        []string
}

// newEnv copies the fixture into a temporary path directory.
func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	e := &env{path: filepath.Join(dir, "path_sets"), core: filepath.Join(dir, "core")}
	copyTree(t, fixtureDir, e.path, nil)
	return e
}

func (e *env) opts(langs ...string) Options {
	if len(langs) == 0 {
		langs = []string{"java", "python"}
	}
	return Options{Langs: langs, PathDir: e.path, CoreDir: e.core, KVMDirs: e.kvm}
}

func (e *env) write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.path, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *env) remove(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(e.path, name)); err != nil {
		t.Fatal(err)
	}
}

// editRecord rewrites the JSON record at p through edit.
func editRecord(t *testing.T, p string, edit func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// setField sets one field of the record name in the path directory (nil:
// JSON null).
func (e *env) setField(t *testing.T, name, key string, val any) {
	t.Helper()
	editRecord(t, filepath.Join(e.path, name), func(m map[string]any) { m[key] = val })
}

func fileHex(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha(data)
}

// writeCfg replaces <stem>.cfg and makes every record beside it vouch for it.
func (e *env) writeCfg(t *testing.T, stem, data string) {
	t.Helper()
	e.write(t, stem+".cfg", data)
	e.setField(t, stem+".json", "cfg_sha256", sha([]byte(data)))
	if _, err := os.Stat(filepath.Join(e.path, stem+".abi10.json")); err == nil {
		e.setField(t, stem+".abi10.json", "verified_cfg_sha256", sha([]byte(data)))
	}
}

// writeSidecar replaces <stem>.abi10.cfg and makes its record vouch for it.
func (e *env) writeSidecar(t *testing.T, stem, data string) {
	t.Helper()
	e.write(t, stem+".abi10.cfg", data)
	e.setField(t, stem+".abi10.json", "abi10_cfg_sha256", sha([]byte(data)))
}

// merged runs a first merge, a tree for what follows to keep or replace,
// and returns its hash.
func (e *env) merged(t *testing.T) string {
	t.Helper()
	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	return treeHash(t, e.core)
}

// addNewRow adds /srv/new to java_one's policy, a row the next merge
// carries into BaseLanguage-java.cfg (hasNewRow).
func (e *env) addNewRow(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.path, "java_one.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	e.writeCfg(t, "java_one", string(data)+"[read]\n/srv/new\n")
}

// hasNewRow reports whether tree's java base holds addNewRow's row.
func hasNewRow(tree map[string]string) bool {
	return strings.Contains(tree["BaseLanguage-java.cfg"], "/srv/new")
}

// kept fails t unless the tree still hashes to before and no temporary is
// left beside it; what names the step that should have kept it.
func (e *env) kept(t *testing.T, before, what string) {
	t.Helper()
	if treeHash(t, e.core) != before {
		t.Errorf("%s changed the tree", what)
	}
	if s := siblings(t, e.core); len(s) != 0 {
		t.Errorf("temporaries left after %s: %v", what, s)
	}
}

func TestFixtureGolden(t *testing.T) {
	e := newEnv(t)
	sum, err := Run(e.opts())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := readTree(t, e.core)
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		for p, data := range got {
			dst := filepath.Join(goldenDir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := readTree(t, goldenDir)
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		w, inW := want[p]
		g, inG := got[p]
		switch {
		case !inG:
			t.Errorf("%s: missing from the merge, golden has it", p)
		case !inW:
			t.Errorf("%s: written by the merge, not in the golden tree (go test -update, then review)", p)
		case g != w:
			t.Errorf("%s differs from the golden (go test -update, then review the diff):\ngot:\n%s\nwant:\n%s", p, g, w)
		}
	}
	// Phobos's pinned outputs, and the invariants behind them.
	pinned := map[string]string{
		"Abi10-java.cfg":               "[bind]\nallow 5000 udp\n",
		"exercises/java_two.abi10.cfg": "[bind]\nallow 5000 udp\n",
		"exercises/java_one.cfg":       "[limits]\ntimeout=90\ncpu=60\nnproc=96\nnofile=512\nfsize_mb=16\n",
		"TailPhobos.cfg":               "--chdir /var/tmp/testing-dir\n",
	}
	for p, w := range pinned {
		if got[p] != w {
			t.Errorf("%s = %q, want %q", p, got[p], w)
		}
	}
	for p, data := range got {
		if strings.HasPrefix(p, "Base") && strings.Contains(data, "udp") {
			t.Errorf("%s holds a udp row; ABI-10 rows never enter a base", p)
		}
		if strings.HasPrefix(p, "Base") && strings.Contains(data, "[limits]") {
			t.Errorf("%s holds [limits]", p)
		}
		if strings.HasSuffix(p, ".cfg") && p != "TailPhobos.cfg" {
			pol, err := policy.Parse(p, []byte(data))
			if err != nil {
				t.Errorf("%s does not parse: %v", p, err)
			} else if string(pol.Render()) != data {
				t.Errorf("%s does not render to itself", p)
			} else if n := pol.StrictSubsets(); len(n) > 0 {
				t.Errorf("%s nests strict subsets: %v", p, n)
			}
		}
	}
	if len(sum.Languages) != 2 || len(sum.Languages[0].Exercises) != 2 || sum.Languages[0].ABI10Rows[0] != "allow 5000 udp" {
		t.Errorf("summary = %+v", sum)
	}
	if len(siblings(t, e.core)) != 0 {
		t.Errorf("temporaries left beside the tree: %v", siblings(t, e.core))
	}
	// A second run over the same inputs writes the same tree.
	before := treeHash(t, e.core)
	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	if treeHash(t, e.core) != before {
		t.Error("a second identical merge changed the tree")
	}
}

// TestRefusals: every refusal names its problem, and the tree is
// byte-identical before and after.
func TestRefusals(t *testing.T) {
	const java1 = "[read]\n/usr\n"
	for _, tc := range []struct {
		Name  string
		Langs []string
		Setup func(t *testing.T, e *env)
		Want  []string
	}{
		{"aborted", nil, func(t *testing.T, e *env) {
			e.write(t, "java_three.aborted.json", `{"schema_version": 2, "key": "java", "exercise": "three", "stage": "all", "aborted": "flaky reference"}`)
		}, []string{"java_three was aborted: flaky reference"}},
		{"retired paths", nil, func(t *testing.T, e *env) { e.write(t, "java_union.paths", "/usr r\n") },
			[]string{"java_union.paths is a retired Bubblewrap path set; remove it"}},
		{"record without cfg", nil, func(t *testing.T, e *env) { e.write(t, "java_orphan.json", "{}") },
			[]string{"java_orphan.json has no java_orphan.cfg beside it"}},
		{"cfg without record", nil, func(t *testing.T, e *env) { e.remove(t, "java_one.json") },
			[]string{"java_one.cfg has no java_one.json beside it"}},
		{"record not json", nil, func(t *testing.T, e *env) { e.write(t, "java_one.json", "{") },
			[]string{"java_one.json is not JSON"}},
		{"record not object", nil, func(t *testing.T, e *env) { e.write(t, "java_one.json", "[]") },
			[]string{"java_one.json is not a JSON object"}},
		{"schema", nil, func(t *testing.T, e *env) { e.setField(t, "java_one.json", "schema_version", 1) },
			[]string{"java_one.json has schema_version 1; want 2"}},
		{"schema missing", nil, func(t *testing.T, e *env) { e.setField(t, "java_one.json", "schema_version", nil) },
			[]string{"java_one.json has schema_version null; want 2"}},
		{"stage", nil, func(t *testing.T, e *env) { e.setField(t, "java_one.json", "stage", "filesystem") },
			[]string{`java_one.json records a prune stopped after its "filesystem" stage, not one to ship`}},
		{"key", nil, func(t *testing.T, e *env) { e.setField(t, "java_one.json", "key", "python") },
			[]string{`java_one.json names key "python"; want "java"`}},
		{"exercise", nil, func(t *testing.T, e *env) { e.setField(t, "java_one.json", "exercise", "two") },
			[]string{`java_one.json names exercise "two"; want "one"`}},
		{"cfg sha", nil, func(t *testing.T, e *env) {
			data, _ := os.ReadFile(filepath.Join(e.path, "java_one.cfg"))
			e.write(t, "java_one.cfg", string(data)+"# edited\n")
		}, []string{"java_one.cfg is not the file java_one.json records: its SHA-256 differs", "java_one.abi10.json verified another java_one.cfg than the one beside it"}},
		{"cfg sha prefixed wrong", nil, func(t *testing.T, e *env) { e.setField(t, "java_one.json", "cfg_sha256", "sha256:00") },
			[]string{"java_one.cfg is not the file java_one.json records"}},
		{"cfg unreadable policy", nil, func(t *testing.T, e *env) { e.writeCfg(t, "java_one", "[read]\nrelative\n") },
			[]string{`a pruned configuration cannot be read: java_one.cfg:2: [read] path "relative" is not absolute`}},
		{"udp row in cfg", nil, func(t *testing.T, e *env) { e.writeCfg(t, "java_one", java1+"[bind]\nallow 5000 udp\n") },
			[]string{"java_one.cfg holds [bind] allow 5000 udp, which only Landlock ABI 10 enforces"}},
		{"bad exercise name", nil, func(t *testing.T, e *env) {
			e.write(t, "java_.cfg", java1)
			e.write(t, "java_.json", "{}")
		}, []string{`java_.cfg: exercise name "" is not letters`}},
		{"abi10 record without cfg", nil, func(t *testing.T, e *env) { e.write(t, "java_ghost.abi10.json", "{}") },
			[]string{"java_ghost.abi10.json has no java_ghost.cfg beside it"}},
		{"sidecar without cfg", nil, func(t *testing.T, e *env) { e.write(t, "java_ghost.abi10.cfg", "[bind]\nallow 1 udp\n") },
			[]string{"java_ghost.abi10.cfg has no java_ghost.cfg beside it"}},
		{"sidecar without record", nil, func(t *testing.T, e *env) { e.remove(t, "java_two.abi10.json") },
			[]string{"java_two.abi10.cfg has no java_two.abi10.json beside it"}},
		{"abi10 not json", nil, func(t *testing.T, e *env) { e.write(t, "java_two.abi10.json", "nope") },
			[]string{"java_two.abi10.json is not JSON"}},
		{"abi10 schema", nil, func(t *testing.T, e *env) { e.setField(t, "java_two.abi10.json", "schema_version", 2) },
			[]string{"java_two.abi10.json has schema_version 2; want 1"}},
		{"abi10 key", nil, func(t *testing.T, e *env) { e.setField(t, "java_two.abi10.json", "key", "jav") },
			[]string{`java_two.abi10.json names key "jav"; want "java"`}},
		{"abi10 exercise", nil, func(t *testing.T, e *env) { e.setField(t, "java_two.abi10.json", "exercise", "one") },
			[]string{`java_two.abi10.json names exercise "one"; want "two"`}},
		{"abi10 not verified", nil, func(t *testing.T, e *env) {
			e.setField(t, "java_two.abi10.json", "verified", false)
			e.setField(t, "java_two.abi10.json", "aborted", "the audit cross-check found 1 strace denial(s) the kernel's records do not agree with")
		}, []string{"java_two.abi10.json records a KVM run that did not verify the policy: the audit cross-check found 1"}},
		{"abi10 mismatches", nil, func(t *testing.T, e *env) {
			e.setField(t, "java_two.abi10.json", "mismatches", []any{map[string]any{"path": "/etc/shadow"}})
		}, []string{"java_two.abi10.json records a KVM run that did not verify the policy: 1 mismatches"}},
		{"abi10 verified other cfg", nil, func(t *testing.T, e *env) {
			e.setField(t, "java_two.abi10.json", "verified_cfg_sha256", strings.Repeat("0", 64))
		}, []string{"java_two.abi10.json verified another java_two.cfg than the one beside it"}},
		{"abi10 below 10", nil, func(t *testing.T, e *env) { e.setField(t, "java_two.abi10.json", "landlock_abi", 9) },
			[]string{"java_two.abi10.json records a kernel below Landlock version 10 (landlock_abi 9)"}},
		{"abi10 abi as text", nil, func(t *testing.T, e *env) { e.setField(t, "java_two.abi10.json", "landlock_abi", "10") },
			[]string{`java_two.abi10.json has field landlock_abi of the wrong type: a string; want an integer`}},
		{"sidecar beside null record", nil, func(t *testing.T, e *env) { e.setField(t, "java_two.abi10.json", "abi10_cfg_sha256", nil) },
			[]string{"java_two.abi10.cfg is beside a record that wrote no sidecar"}},
		{"sidecar missing", nil, func(t *testing.T, e *env) { e.remove(t, "java_two.abi10.cfg") },
			[]string{"java_two.abi10.json names a sidecar, and java_two.abi10.cfg is missing"}},
		{"sidecar tampered", nil, func(t *testing.T, e *env) { e.write(t, "java_two.abi10.cfg", "[bind]\nallow 6000 udp\n") },
			[]string{"java_two.abi10.cfg is not the file java_two.abi10.json records: its SHA-256 differs"}},
		{"sidecar read", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[read]\n/usr\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows: it has [read] rows"}},
		{"sidecar connect", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[connect]\nallow 127.0.0.1:53 udp\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows: it has [connect] rows"}},
		{"sidecar tcp", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[bind]\nallow 5000\n") },
			[]string{`java_two.abi10.cfg holds more than UDP bind rows: row "allow 5000" is not allow <port> udp`}},
		{"sidecar limits", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[limits]\ntimeout=5\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows: it has [limits] rows"}},
		{"sidecar 00", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[bind]\nallow 00 udp\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows"}},
		{"sidecar 007", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[bind]\nallow 007 udp\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows"}},
		{"sidecar 65536", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[bind]\nallow 65536 udp\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows"}},
		{"sidecar arabic digits", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[bind]\nallow \u0665000 udp\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows"}},
		{"sidecar empty section", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "[write]\n[bind]\nallow 5000 udp\n") },
			[]string{`java_two.abi10.cfg holds more than UDP bind rows: row "[write]" is not allow <port> udp`}},
		{"sidecar no rows", nil, func(t *testing.T, e *env) { e.writeSidecar(t, "java_two", "# nothing\n[bind]\n") },
			[]string{"java_two.abi10.cfg holds more than UDP bind rows: it holds no row"}},
		{"language without results", []string{"java", "rust"}, nil,
			[]string{"no usable pruning result for: rust (no rust_*.cfg in"}},
		{"bad key", []string{"Java"}, nil, []string{`language key "Java" is not lower-case letters, digits and '-'`}},
		{"duplicate key", []string{"java", "java"}, nil, []string{`language "java" is given twice`}},
		{"execute beside write", nil, func(t *testing.T, e *env) {
			data, _ := os.ReadFile(filepath.Join(e.path, "java_one.cfg"))
			e.writeCfg(t, "java_one", strings.Replace(string(data), "[execute]\n", "[execute]\n/opt/tool\n", 1))
			data, _ = os.ReadFile(filepath.Join(e.path, "java_two.cfg"))
			e.writeCfg(t, "java_two", strings.Replace(string(data), "[write]\n", "[write]\n/opt/tool/cache\n", 1))
		}, []string{"BaseLanguage-java.cfg would put [execute] on /opt/tool beside a write-class right on /opt/tool/cache, which no single exercise had"}},
		{"several problems at once", nil, func(t *testing.T, e *env) {
			e.write(t, "java_three.aborted.json", `{"aborted": "ran no tests"}`)
			e.setField(t, "python_basic.json", "stage", "limits")
			e.setField(t, "java_two.abi10.json", "landlock_abi", 7)
		}, []string{"java_three was aborted: ran no tests", "java_two.abi10.json records a kernel below Landlock version 10", `python_basic.json records a prune stopped after its "limits" stage`}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := Run(e.opts()); err != nil { // a previous tree to protect
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.core, "notes.txt"), []byte("kept\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, e.core)
			if tc.Setup != nil {
				tc.Setup(t, e)
			}
			o := e.opts(tc.Langs...)
			sum, err := Run(o)
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("Run = %+v, %v; want a refusal with %q", sum, err, tc.Want)
			}
			if len(r.Problems) != len(tc.Want) {
				t.Errorf("problems = %q; want %d", r.Problems, len(tc.Want))
			}
			all := strings.Join(r.Problems, "\n")
			for _, w := range tc.Want {
				if !strings.Contains(all, w) {
					t.Errorf("problems =\n%s\nwant one with %q", all, w)
				}
			}
			e.kept(t, before, "the refusal")
		})
	}
}

func TestOptionRefusals(t *testing.T) {
	for _, tc := range []struct {
		Name string
		Want string
		Opts func(o *Options)
	}{
		{"path dir missing", "does not exist; want the directory of the pruner's results",
			func(o *Options) { o.PathDir += "-missing" }},
		{"kvm dir missing", "cannot list KVM directory",
			func(o *Options) { o.KVMDirs = []string{o.PathDir + "-kvm-a", o.PathDir + "-kvm-b"} }},
		{"runtime chdir relative", `runtime directory "var/tmp" is not an absolute, normal path`,
			func(o *Options) { o.RuntimeChdir = "var/tmp" }},
		{"runtime chdir with space", `runtime directory "/var/tmp/a b" is not an absolute, normal path without white space`,
			func(o *Options) { o.RuntimeChdir = "/var/tmp/a b" }},
		{"no language", "no language given", func(o *Options) { o.Langs = nil }},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := Run(e.opts()); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, e.core)
			o := e.opts()
			tc.Opts(&o)
			_, err := Run(o)
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(strings.Join(r.Problems, "\n"), tc.Want) {
				t.Fatalf("Run = %v; want a refusal with %q", err, tc.Want)
			}
			if treeHash(t, e.core) != before {
				t.Error("the refusal changed the output tree")
			}
		})
	}
}

// splitKVM moves the fixture's ABI-10 files into n observer directories.
func splitKVM(t *testing.T, e *env, n int) {
	dir := filepath.Dir(e.path)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("kvm-%d", i))
		copyTree(t, e.path, d, func(name string) bool { return strings.Contains(name, ".abi10.") })
		verifiedNoRows(t, e, d, "python", "basic")
		e.kvm = append(e.kvm, d)
	}
	for _, name := range []string{"java_one.abi10.json", "java_two.abi10.json", "java_two.abi10.cfg"} {
		e.remove(t, name)
	}
}

// verifiedNoRows writes into dir the record of a KVM run that verified
// lang_ex's policy of the path directory and found no ABI-10 row (as
// java_one's of the fixture): with --kvm-dir every exercise needs one.
func verifiedNoRows(t *testing.T, e *env, dir, lang, ex string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.path, "java_one.abi10.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	rec["key"], rec["exercise"] = lang, ex
	rec["verified_cfg_sha256"] = fileHex(t, filepath.Join(e.path, lang+"_"+ex+".cfg"))
	if data, err = json.MarshalIndent(rec, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lang+"_"+ex+".abi10.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestKVMDirs(t *testing.T) {
	// Identical rows under different comment headers merge, and give the
	// same tree as the single-directory fixture.
	e := newEnv(t)
	splitKVM(t, e, 2)
	other := filepath.Join(e.kvm[1], "java_two.abi10.cfg")
	side := "# ABI 10 rows for java/two, from the KVM run on kernel 7.2.13 on 2026-11-22T09:30:00Z.\n# another guest, another date\n[bind]\nallow 5000 udp\n"
	if err := os.WriteFile(other, []byte(side), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(e.kvm[1], "java_two.abi10.json")
	data, _ := os.ReadFile(rec)
	data = []byte(strings.Replace(string(data), fileHex(t, filepath.Join(e.kvm[0], "java_two.abi10.cfg")), sha([]byte(side)), 1))
	if err := os.WriteFile(rec, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(e.opts()); err != nil {
		t.Fatalf("agreeing guests: %v", err)
	}
	if got, want := readTree(t, e.core), readTree(t, goldenDir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("merge from two agreeing guests differs from the golden tree")
	}

	for _, tc := range []struct {
		Name  string
		Setup func(t *testing.T, e *env)
		Want  string
	}{
		{"one differing row", func(t *testing.T, e *env) {
			p := filepath.Join(e.kvm[1], "java_two.abi10.cfg")
			if err := os.WriteFile(p, []byte("# other guest\n[bind]\nallow 5001 udp\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, `the guests disagree on java_two: ` + "%0" + ` has rows ["[bind]", "allow 5000 udp"], ` + "%1" + ` has rows ["[bind]", "allow 5001 udp"]`},
		{"sidecar in one guest only", func(t *testing.T, e *env) {
			if err := os.Remove(filepath.Join(e.kvm[1], "java_two.abi10.cfg")); err != nil {
				t.Fatal(err)
			}
		}, "the guests disagree on java_two: %0 has java_two.abi10.cfg, %1 has none"},
		{"extra sidecar in the second guest", func(t *testing.T, e *env) {
			p := filepath.Join(e.kvm[1], "java_one.abi10.cfg")
			if err := os.WriteFile(p, []byte("[bind]\nallow 53 udp\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "the guests disagree on java_one: %1 has java_one.abi10.cfg, %0 has none"},
		{"no record in the second guest (a failed observation)", func(t *testing.T, e *env) {
			for _, n := range []string{"java_two.abi10.json", "java_two.abi10.cfg"} {
				if err := os.Remove(filepath.Join(e.kvm[1], n)); err != nil {
					t.Fatal(err)
				}
			}
		}, "java_two has no java_two.abi10.json in %1; with --kvm-dir, every exercise needs the record of a KVM run that verified it"},
		{"no record in either guest", func(t *testing.T, e *env) {
			for _, d := range e.kvm {
				if err := os.Remove(filepath.Join(d, "python_basic.abi10.json")); err != nil {
					t.Fatal(err)
				}
			}
		}, "python_basic has no python_basic.abi10.json in %0"},
		{"the second guest did not verify", func(t *testing.T, e *env) {
			p := filepath.Join(e.kvm[1], "java_one.abi10.json")
			data, _ := os.ReadFile(p)
			data = []byte(strings.Replace(string(data), `"verified": true`, `"verified": false`, 1))
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "in %1: java_one.abi10.json records a KVM run that did not verify the policy"},
		{"differing sidecars, both links", func(t *testing.T, e *env) {
			for i, port := range []string{"5000", "5001"} {
				real := filepath.Join(filepath.Dir(e.kvm[i]), "side-"+port)
				if err := os.WriteFile(real, []byte("[bind]\nallow "+port+" udp\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				link := filepath.Join(e.kvm[i], "java_two.abi10.cfg")
				if err := os.Remove(link); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(real, link); err != nil {
					t.Fatal(err)
				}
			}
		}, `the guests disagree on java_two: %0 has rows ["[bind]", "allow 5000 udp"], %1 has rows ["[bind]", "allow 5001 udp"]`},
		{"abi10 files in path dir too", func(t *testing.T, e *env) {
			e.write(t, "java_two.abi10.cfg", "[bind]\nallow 5000 udp\n")
		}, "java_two.abi10.cfg is in the path directory while a KVM directory is given"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			e := newEnv(t)
			splitKVM(t, e, 2)
			before := e.merged(t)
			tc.Setup(t, e)
			_, err := Run(e.opts())
			var r *Refusal
			want := strings.NewReplacer("%0", e.kvm[0], "%1", e.kvm[1]).Replace(tc.Want)
			if !errors.As(err, &r) || !strings.Contains(strings.Join(r.Problems, "\n"), want) {
				t.Fatalf("Run = %v; want a refusal with %q", err, want)
			}
			e.kept(t, before, "the refusal")
		})
	}
}

func TestStaleAndForeignFiles(t *testing.T) {
	e := newEnv(t)
	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	foreign := map[string]string{
		"BaseLanguage-rust.cfg":    "[read]\n/usr/lib/rustlib\n",
		"exercises/rust_x.cfg":     "[limits]\ntimeout=5\n",
		"debug/BaseRustOnly.cfg":   "",
		"README.txt":               "reviewed by hand\n",
		"exercises/java_old.cfg":   "[limits]\ntimeout=1\n", // stale: java is merged again
		"debug/BasePythonOnly.cfg": "stale\n",
	}
	for p, data := range foreign {
		if err := os.WriteFile(filepath.Join(e.core, p), []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	// The next merge has no KVM files: no Abi10 file may survive.
	for _, n := range []string{"java_one.abi10.json", "java_two.abi10.json", "java_two.abi10.cfg"} {
		e.remove(t, n)
	}
	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, e.core)
	for _, p := range []string{"BaseLanguage-rust.cfg", "exercises/rust_x.cfg", "debug/BaseRustOnly.cfg", "README.txt"} {
		if got[p] != foreign[p] {
			t.Errorf("foreign file %s = %q, want it carried over unchanged", p, got[p])
		}
	}
	if fi, err := os.Stat(filepath.Join(e.core, "README.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("README.txt mode not kept: %v %v", fi, err)
	}
	for _, p := range []string{"exercises/java_old.cfg", "Abi10-java.cfg", "exercises/java_two.abi10.cfg"} {
		if _, ok := got[p]; ok {
			t.Errorf("stale %s survived the merge", p)
		}
	}
	if got["debug/BasePythonOnly.cfg"] == "stale\n" {
		t.Error("debug/BasePythonOnly.cfg was not rewritten")
	}
}

func TestBasePhobosOmittedOnConflict(t *testing.T) {
	e := newEnv(t)
	data, _ := os.ReadFile(filepath.Join(e.path, "python_basic.cfg"))
	// python may execute what java may write.
	e.writeCfg(t, "python_basic", strings.Replace(string(data), "[execute]\n", "[execute]\n/tmp/gradle/native\n", 1))
	sum, err := Run(e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0], "BasePhobos.cfg is not written: across languages the union would put [execute] on /tmp/gradle/native beside a write-class right on /tmp") {
		t.Fatalf("warnings = %q", sum.Warnings)
	}
	if _, err := os.Stat(filepath.Join(e.core, "BasePhobos.cfg")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("BasePhobos.cfg written despite the conflict: %v", err)
	}
	if !strings.Contains(sum.Markdown(), "Warnings:") {
		t.Error("Markdown summary lacks the warning")
	}
}

func TestWriteFailureKeepsTree(t *testing.T) {
	e := newEnv(t)
	before := e.merged(t)
	e.addNewRow(t)
	o := e.opts()
	o.hook = func(s stage) error {
		if s == stageBuilt {
			return errors.New("disk full (injected)")
		}
		return nil
	}
	if _, err := Run(o); err == nil || !strings.Contains(err.Error(), "(the previous tree is unchanged): disk full (injected)") {
		t.Fatalf("Run = %v; want the injected error", err)
	}
	e.kept(t, before, "a failed write")
	// A second writer holding the lock makes the merge fail, tree unchanged.
	unlock, err := lockTree(filepath.Dir(e.core), filepath.Base(e.core))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(e.opts()); err == nil || !strings.Contains(err.Error(), "another merge is writing") {
		t.Fatalf("Run under a held lock = %v", err)
	}
	unlock()
	e.kept(t, before, "a locked-out merge")
	// The core directory is a file: refused before anything is built.
	e2 := newEnv(t)
	if err := os.WriteFile(e2.core, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(e2.opts()); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("Run onto a file = %v", err)
	}
}

// TestCrash kills a real process at each stage of the writer with SIGKILL
// and checks the tree: the old one before the exchange, the complete new
// one after it, never a mixture.
func TestCrash(t *testing.T) {
	for _, st := range []stage{stageBuilt, stageExchanged} {
		t.Run(string(st), func(t *testing.T) {
			e := newEnv(t)
			e.merged(t)
			oldTree := readTree(t, e.core)
			e.addNewRow(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
			cmd.Env = append(os.Environ(), "LOCKSTEP_TEST_CRASH_AT="+string(st), "LOCKSTEP_TEST_PATH="+e.path, "LOCKSTEP_TEST_CORE="+e.core)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child = %v; want killed by SIGKILL\n%s", err, out)
			}
			got := readTree(t, e.core)
			switch st {
			case stageBuilt:
				if fmt.Sprint(got) != fmt.Sprint(oldTree) {
					t.Error("a crash before the exchange changed the tree")
				}
			case stageExchanged:
				if !hasNewRow(got) || len(got) != len(oldTree) {
					t.Errorf("a crash after the exchange left an incomplete tree: %d files", len(got))
				}
			}
			// The next run removes what the crash left and succeeds.
			if _, err := Run(e.opts()); err != nil {
				t.Fatal(err)
			}
			if s := siblings(t, e.core); len(s) != 0 {
				t.Errorf("temporaries left after the next run: %v", s)
			}
		})
	}
}

// TestMain makes the test binary TestCrash's child when LOCKSTEP_TEST_CRASH_AT
// is set: it runs the orchestrator and kills itself at that stage.
func TestMain(m *testing.M) {
	if at := os.Getenv("LOCKSTEP_TEST_CRASH_AT"); at != "" {
		crashChild(at)
		return
	}
	os.Exit(m.Run())
}

func crashChild(at string) {
	o := Options{Langs: []string{"java", "python"}, PathDir: os.Getenv("LOCKSTEP_TEST_PATH"), CoreDir: os.Getenv("LOCKSTEP_TEST_CORE")}
	o.hook = func(s stage) error {
		if string(s) == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	}
	if _, err := Run(o); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "crash child: the child was not killed at", at)
	os.Exit(2)
}

func TestCapitalised(t *testing.T) {
	for in, want := range map[string]string{"java": "Java", "java-gradle": "Java-gradle", "c": "C", "": ""} {
		if got := Capitalised(in); got != want {
			t.Errorf("Capitalised(%q) = %q, want %q", in, got, want)
		}
	}
}
