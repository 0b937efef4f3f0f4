package exercise

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const referenceRoot = "../testdata/exercises"

func TestDiscoverReferenceExercises(t *testing.T) {
	found, err := Discover(referenceRoot)
	if err != nil {
		t.Fatalf("Discover(%s) = %v", referenceRoot, err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.Key+" "+f.Family+"/"+f.Name)
	}
	want := []string{"broken broken/failing-test", "c c/make-reference", "c-gcc c-gcc/gcc-reference", "cpp cpp/cmake-reference", "fixture fixture/udp-fixture",
		"generic generic/shell-reference", "java-maven java-maven/maven-reference", "python python/pytest-reference",
		"r r/testthat-reference"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Discover(%s) = %q, want %q", referenceRoot, got, want)
	}
	keys, err := Keys(referenceRoot)
	wantKeys := []string{"broken", "c", "c-gcc", "cpp", "fixture", "generic", "java-maven", "python", "r"}
	if err != nil || !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("Keys(%s) = %q, %v; want %q", referenceRoot, keys, err, wantKeys)
	}
	for _, f := range found {
		e, err := Read(f)
		if err != nil {
			t.Errorf("Read(%s) = %v", f.Dir, err)
			continue
		}
		if e.Script != "build_script.sh" {
			t.Errorf("Read(%s).Script = %q, want build_script.sh", f.Dir, e.Script)
		}
	}
	c, err := ForKey(referenceRoot, "c")
	if err != nil || len(c) != 1 {
		t.Fatalf("ForKey(c) = %v, %v; want one exercise", c, err)
	}
	e, err := Read(c[0])
	if err != nil {
		t.Fatal(err)
	}
	if d := e.CompiledProgramsPath(DefaultWorkDir); d != "/var/tmp/testing-dir/assignment" {
		t.Errorf("c exercise CompiledProgramsPath = %q, want /var/tmp/testing-dir/assignment", d)
	}
	if e.Stem() != "c_make-reference" {
		t.Errorf("Stem() = %q, want c_make-reference", e.Stem())
	}
	if none, err := ForKey(referenceRoot, "rust"); err != nil || len(none) != 0 {
		t.Errorf("ForKey(rust) = %v, %v; want none, nil", none, err)
	}
	if _, err := ForKey(referenceRoot, "Rust"); err == nil {
		t.Errorf("ForKey(Rust) = nil error, want a refusal of the key")
	}
}

// tree builds a testing root from path → content ("" + trailing / = folder,
// "-> target" = symbolic link); every exercise gets an executable build script.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(p, "/"):
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "-> "):
			if err := os.Symlink(strings.TrimPrefix(content, "-> "), full); err != nil {
				t.Fatal(err)
			}
		default:
			mode := os.FileMode(0o644)
			if strings.HasPrefix(filepath.Base(p), "build_script") {
				mode = 0o755
			}
			if err := os.WriteFile(full, []byte(content), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func TestDiscoverRefusals(t *testing.T) {
	const script = "#!/bin/bash\ntrue\n"
	tests := []struct {
		Name  string
		Files map[string]string
		Want  []string // one substring per problem, in order
	}{
		{"non-object prune.json", map[string]string{
			"python/a/build_script.sh": script, "python/a/prune.json": `["python"]`,
		}, []string{"python/a/prune.json: not a JSON object"}},
		{"bad key", map[string]string{
			"python/a/build_script.sh": script, "python/a/prune.json": `{"key": "Python3"}`,
		}, []string{`python/a/prune.json: key "Python3" is not a key`}},
		{"key not a string", map[string]string{
			"python/a/build_script.sh": script, "python/a/prune.json": `{"key": ["python"]}`,
		}, []string{"key is a list, want a string"}},
		{"bad family name without prune.json", map[string]string{
			"Python/a/build_script.sh": script,
		}, []string{`the family name "Python" is not a key`}},
		{"two exercises of one key with one name", map[string]string{
			"python/calc/build_script.sh": script,
			"py2/calc/build_script.sh":    script, "py2/calc/prune.json": `{"key": "python"}`,
			"python/other/build_script.sh": script,
		}, []string{`exercises py2/calc, python/calc of key "python" share the name "calc"`}},
		{"prune.json a folder", map[string]string{
			"c/a/build_script.sh": script, "c/a/prune.json/": "",
		}, []string{"c/a/prune.json: is a directory, want a regular file"}},
		{"prune.json a dangling link", map[string]string{
			"c/a/build_script.sh": script, "c/a/prune.json": "-> missing.json",
		}, []string{"c/a/prune.json: unreadable"}},
		// Refused on the host, before any guest boots for them.
		{"unknown prune.json key", map[string]string{
			"python/a/build_script.sh": script, "python/a/prune.json": `{"evil": 1}`,
		}, []string{`python/a/prune.json: unknown keys "evil"; the keys are key, seed,`}},
		{"prune.json value of the wrong type", map[string]string{
			"python/a/build_script.sh": script, "python/a/prune.json": `{"heap_pinned": "yes", "declared_hosts": "x:1"}`,
		}, []string{"python/a/prune.json: declared_hosts is a string, want a list of strings",
			"python/a/prune.json: heap_pinned is a string, want true or false"}},
		{"no build script", map[string]string{
			"python/a/run.sh": script,
		}, []string{"python/a: no build_script.sh or build_script, want an executable build script"}},
		{"build script a folder", map[string]string{
			"python/a/build_script.sh/": "",
		}, []string{"python/a: build_script.sh is a directory, want an executable regular file"}},
		{"every problem at once", map[string]string{
			"c/a/build_script.sh": script, "c/a/prune.json": `7`,
			"c/b/build_script.sh": script, "c/b/prune.json": `{"key": "C"}`,
		}, []string{"c/a/prune.json: not a JSON object", `c/b/prune.json: key "C"`}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			root := tree(t, tt.Files)
			found, err := Discover(root)
			var de *DiscoveryError
			if !errors.As(err, &de) {
				t.Fatalf("Discover = %v, %v; want a *DiscoveryError", found, err)
			}
			if found != nil {
				t.Errorf("Discover returned %v with its refusal, want nothing", found)
			}
			lines := de.Lines()
			if len(lines) != len(tt.Want) {
				t.Fatalf("Discover problems = %q, want %d like %q", lines, len(tt.Want), tt.Want)
			}
			for i, w := range tt.Want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("Discover problem %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Discover error has a line break: %q", err)
			}
		})
	}
}

func TestDiscoverIgnores(t *testing.T) {
	root := tree(t, map[string]string{
		"generic/a/build_script.sh":       "#!/bin/bash\n",
		".git/objects/build_script.sh":    "#!/bin/bash\n",
		"generic/.hidden/prune.json":      `[]`,
		"README.md":                       "not a family",
		"generic/notes.txt":               "not an exercise",
		"linked/b/build_script.sh":        "#!/bin/bash\n",
		"alias":                           "-> linked",
		"generic/a/prune.json":            `{"report_globs": ["out/*.xml"]}`,
		"generic/a/unrelated/prune.json/": "",
	})
	found, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.Key+" "+f.Family+"/"+f.Name)
	}
	want := []string{"alias alias/b", "generic generic/a", "linked linked/b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Discover = %q, want %q", got, want)
	}
}

func TestReadRefusals(t *testing.T) {
	tests := []struct {
		Name  string
		Files map[string]string
		Want  []string
	}{
		{"no build script", map[string]string{"k/a/run.sh": "x"}, []string{"no build_script.sh or build_script"}},
		{"not executable", map[string]string{"k/a/build_script.sh/": ""}, []string{"build_script.sh is a directory"}},
		{"unknown prune.json key", map[string]string{"k/a/build_script": "x", "k/a/prune.json": `{"kept_seeds": "x"}`},
			[]string{`unknown keys "kept_seeds"`}},
		{"committed report", map[string]string{"k/a/build_script": "x", "k/a/test-reports/old.xml": "<testsuite/>"},
			[]string{"test-reports/old.xml is committed but matches the report globs"}},
		{"committed gradle report", map[string]string{"k/a/build_script": "x",
			"k/a/build/test-results/test/TEST-a.xml": "<testsuite/>"},
			[]string{"build/test-results/test/TEST-a.xml is committed"}},
		{"compiled dir missing", map[string]string{"k/a/build_script": "x",
			"k/a/prune.json": `{"runs_compiled_programs": true}`},
			[]string{`compiled-programs directory "assignment" is not a directory`}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			root := tree(t, tt.Files)
			e, err := ReadDir(filepath.Join(root, "k", "a"))
			var re *RefusedError
			if !errors.As(err, &re) || !errors.Is(err, ErrRefused) {
				t.Fatalf("ReadDir = %+v, %v; want a *RefusedError wrapping ErrRefused", e, err)
			}
			if len(re.Problems) != len(tt.Want) {
				t.Fatalf("ReadDir problems = %q, want %d like %q", re.Problems, len(tt.Want), tt.Want)
			}
			for i, w := range tt.Want {
				if !strings.Contains(re.Problems[i], w) {
					t.Errorf("ReadDir problem %d = %q, want it to contain %q", i, re.Problems[i], w)
				}
			}
		})
	}
	// build_script.sh is preferred to build_script.
	root := tree(t, map[string]string{"k/a/build_script": "x", "k/a/build_script.sh": "y"})
	if e, err := ReadDir(filepath.Join(root, "k", "a")); err != nil || e.Script != "build_script.sh" {
		t.Errorf("ReadDir(both scripts) = %+v, %v; want build_script.sh", e, err)
	}
	if err := os.Chmod(filepath.Join(root, "k", "a", "build_script.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(filepath.Join(root, "k", "a")); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("ReadDir(non-executable build_script.sh) = %v, want a refusal naming it", err)
	}
}

func TestMatchReports(t *testing.T) {
	root := tree(t, map[string]string{
		"build/test-results/test/TEST-a.xml":          "",
		"build/test-results/integration/x/TEST-b.xml": "",
		"build/test-results/TEST-top.xml":             "",
		"build/test-results/test/binary/output.bin":   "",
		"target/surefire-reports/TEST-c.xml":          "",
		"target/surefire-reports/nested/TEST-d.xml":   "",
		"test-reports/e.xml":                          "",
		"test-reports/e.txt":                          "",
		"src/test-reports/f.xml":                      "",
	})
	got, err := MatchReports(root, DefaultReportGlobs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"build/test-results/TEST-top.xml", "build/test-results/integration/x/TEST-b.xml",
		"build/test-results/test/TEST-a.xml", "target/surefire-reports/TEST-c.xml", "test-reports/e.xml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MatchReports(defaults) = %q, want %q", got, want)
	}
	got, err = MatchReports(root, []string{"**/*.xml"})
	if err != nil || len(got) != 7 {
		t.Errorf("MatchReports(**/*.xml) = %q, %v; want all 7 xml files", got, err)
	}
	if _, err := MatchReports(root, []string{"/abs/*.xml"}); err == nil {
		t.Errorf("MatchReports(absolute glob) = nil error, want one")
	}
}

func TestNamed(t *testing.T) {
	found := []Found{{Key: "k", Name: "a"}, {Key: "k", Name: "b"}, {Key: "k", Name: "c"}}
	for _, tc := range []struct {
		names []string
		want  string // kept names, or the error
	}{
		{nil, "a b c"},
		{[]string{"c", "a"}, "a c"},
		{[]string{"b", "x", "y"}, `"x", "y": no such exercise of key "k"; there are: a, b, c`},
	} {
		got, err := Named(found, tc.names...)
		s := ""
		if err != nil {
			s = err.Error()
		} else {
			for _, f := range got {
				s += " " + f.Name
			}
			s = strings.TrimSpace(s)
		}
		if s != tc.want {
			t.Errorf("Named(%q) = %q, want %q", tc.names, s, tc.want)
		}
	}
}
