package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testRef is how docs/reliability.md names a test: `<package dir>.<Test or
// Fuzz name>`, optionally with a subtest after a slash.
var testRef = regexp.MustCompile("`([a-z][a-z0-9/]*)\\.((?:Test|Fuzz)[A-Za-z0-9_]+)(?:/[^`]*)?`")

// TestReliabilityDocNamesRealTests: every test docs/reliability.md cites
// exists in the package it names, and every row of its fault table cites
// one.
func TestReliabilityDocNamesRealTests(t *testing.T) {
	checkDocTests(t, "docs/reliability.md", "| fault", 20)
}

// TestSecurityDocNamesRealTests: the same for docs/security.md, whose every
// item row names the tests that failed before its fix.
func TestSecurityDocNamesRealTests(t *testing.T) {
	checkDocTests(t, "docs/security.md", "| #", 20)
}

// TestSecurityDocListsEveryFuzzTarget: docs/security.md's fuzz table names
// every Fuzz function of the module, so a new parser's target is listed.
func TestSecurityDocListsEveryFuzzTarget(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	fuzz := regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(`)
	n := 0
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../../")))
		for _, m := range fuzz.FindAllStringSubmatch(string(src), -1) {
			n++
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(pkg) + "` \\|.*`" + m[1] + "`")
			if !row.Match(doc) {
				t.Errorf("docs/security.md's fuzz table has no `%s` row naming `%s`", pkg, m[1])
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("walking the module: %v (%d Fuzz functions)", err, n)
	}
}

// checkDocTests fails when doc cites a test that does not exist, cites
// fewer than min, or has a row citing none in a table whose header starts
// with header.
func checkDocTests(t *testing.T, doc, header string, min int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../..", doc))
	if err != nil {
		t.Fatal(err)
	}
	refs := testRef.FindAllStringSubmatch(string(data), -1)
	if len(refs) < min {
		t.Fatalf("%s cites %d tests; want at least %d", doc, len(refs), min)
	}
	sources := map[string]string{}
	for _, r := range refs {
		pkg, name := r[1], r[2]
		src, ok := sources[pkg]
		if !ok {
			files, _ := filepath.Glob(filepath.Join("../..", pkg, "*_test.go"))
			var b strings.Builder
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(data)
			}
			src, sources[pkg] = b.String(), b.String()
		}
		if !strings.Contains(src, "\nfunc "+name+"(") {
			t.Errorf("%s cites %s.%s, which is not a test of %s", doc, pkg, name, pkg)
		}
	}
	// Only the rows of tables whose header starts with header must cite a
	// test (the first line of a table is its header).
	inTable, checked := false, false
	for _, line := range strings.Split(string(data), "\n") {
		row := strings.HasPrefix(line, "| ")
		switch {
		case !row:
			inTable = false
		case !inTable:
			inTable, checked = true, strings.HasPrefix(line, header)
		case checked && !strings.HasPrefix(line, "| ---") && !testRef.MatchString(line):
			t.Errorf("a row of %s cites no test: %s", doc, line)
		}
	}
}
