package recorder

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A base that lacks one row the reference session needs and grants one
// directory no session used: diff lists exactly those two, and a row an
// ancestor row already covers is marked covered, never unused.
func TestDiffReferenceREPL(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "repl")
	if err := copyTree("testdata/repl/recording", rec); err != nil {
		t.Fatal(err)
	}
	g, err := Generate(rec, GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(g.Policy.Render())
	base := strings.Replace(cfg, "/etc/inputrc\n", "", 1)
	base = strings.Replace(base, "[read]\n", "[read]\n/srv/never-used\n/usr/lib/python3.11/never-used\n", 1)
	if base == cfg {
		t.Fatal("the edits changed nothing")
	}
	file := filepath.Join(t.TempDir(), "base.cfg")
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Diff(rec, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Lacks) != 1 || !strings.HasPrefix(d.Lacks[0], "[read] /etc/inputrc (sessions/001 line ") {
		t.Errorf("lacks %q, want [read] /etc/inputrc alone, with its call", d.Lacks)
	}
	if len(d.Unused) != 1 || d.Unused[0] != "[read] /srv/never-used" {
		t.Errorf("unused %q, want [read] /srv/never-used alone", d.Unused)
	}
	if !slices.Contains(d.Covered, "[read] /usr/lib/python3.11/never-used: covered by [read] /usr/lib/python3.11") {
		t.Errorf("covered %q, want the python3.11 sub-directory among them, covered by its ancestor", d.Covered)
	}
	// The generated policy itself lacks nothing.
	if d, err := Diff(rec, filepath.Join(rec, PolicyFile)); err != nil || len(d.Lacks)+len(d.Unused) != 0 {
		t.Errorf("Diff of the generated policy = %+v, %v; want nothing lacking or unused", d, err)
	}
}
