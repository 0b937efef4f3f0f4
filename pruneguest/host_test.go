package pruneguest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range ents {
		ns = append(ns, e.Name())
	}
	return ns
}

// TestCopyResults: a guest's policy and record land in the output
// directory, which a prune of the whole key first rids of the key's earlier
// policies and records (the KVM run's .abi10 files and other keys' stay);
// a guest that wrote neither is status 3 and copies nothing.
func TestCopyResults(t *testing.T) {
	out := t.TempDir()
	writeFiles(t, out, "k_old.cfg", "k_old.json", "k_ex.abi10.json", "k_ex.abi10.cfg", "other_ex.cfg")
	results := t.TempDir()
	writeFiles(t, results, "k_ex.cfg", "k_ex.json", "k_ex.log")
	od := &outDir{dir: out, key: "k", clean: true}
	if status, err := copyResults(results, od, "k_ex"); status != 0 || err != nil {
		t.Fatalf("copyResults = %d, %v; want 0", status, err)
	}
	want := []string{"k_ex.abi10.cfg", "k_ex.abi10.json", "k_ex.cfg", "k_ex.json", "other_ex.cfg"}
	if got := names(t, out); !slices.Equal(got, want) {
		t.Errorf("out holds %v, want %v", got, want)
	}
	// prepared once: a second exercise's results do not clean the first's.
	writeFiles(t, results, "k_two.aborted.json")
	if status, err := copyResults(results, od, "k_two"); status != 0 || err != nil {
		t.Fatalf("copyResults(k_two) = %d, %v; want 0", status, err)
	}
	if got := names(t, out); !slices.Contains(got, "k_ex.cfg") || !slices.Contains(got, "k_two.aborted.json") {
		t.Errorf("out holds %v, want both exercises' files", got)
	}
	if status, err := copyResults(t.TempDir(), od, "k_none"); status != 3 || err != nil {
		t.Errorf("copyResults of empty results = %d, %v; want 3 and no error", status, err)
	}
}
