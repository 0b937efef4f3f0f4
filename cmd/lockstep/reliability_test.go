package main

import (
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
	doc, err := os.ReadFile("../../docs/reliability.md")
	if err != nil {
		t.Fatal(err)
	}
	refs := testRef.FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 20 {
		t.Fatalf("docs/reliability.md cites %d tests; want the fault table's", len(refs))
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
			t.Errorf("docs/reliability.md cites %s.%s, which is not a test of %s", pkg, name, pkg)
		}
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| fault") && !strings.HasPrefix(line, "| ---") && !testRef.MatchString(line) {
			t.Errorf("a row of docs/reliability.md cites no test: %s", line)
		}
	}
}
