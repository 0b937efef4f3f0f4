//go:build linux

package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplacerReplacesTheFileRead: Replace writes the file Read read, through
// a link as WriteFile does, keeping its mode; when the name holds another
// file by then (a link swapped in, a file renamed over it) nothing is
// written anywhere.
func TestReplacerReplacesTheFileRead(t *testing.T) {
	d := t.TempDir()
	target, link := filepath.Join(d, "real.cfg"), filepath.Join(d, "p.cfg")
	if err := os.WriteFile(target, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.cfg", link); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReplace(link)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := r.Read(0); err != nil || string(data) != "old" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	if err := r.Replace([]byte("new")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Errorf("target holds %q; want new", got)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v; want 0640 kept", st.Mode())
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}

	for _, swap := range []func(t *testing.T, victim string){
		func(t *testing.T, victim string) { // a link to another file
			os.Remove(target)
			if err := os.Symlink(victim, target); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, victim string) { // another file renamed over it
			other := filepath.Join(d, "other")
			os.WriteFile(other, []byte("other"), 0o644)
			if err := os.Rename(other, target); err != nil {
				t.Fatal(err)
			}
		},
	} {
		os.Remove(target)
		os.WriteFile(target, []byte("old"), 0o644)
		victim := filepath.Join(d, "victim")
		os.WriteFile(victim, []byte("victim"), 0o644)
		r, err := OpenReplace(link)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(0); err != nil {
			t.Fatal(err)
		}
		swap(t, victim)
		err = r.Replace([]byte("new"))
		r.Close()
		if err == nil || !strings.Contains(err.Error(), "now names another file") {
			t.Errorf("Replace after a swap = %v; want a refusal", err)
		}
		if got, _ := os.ReadFile(victim); string(got) != "victim" {
			t.Errorf("victim holds %q", got)
		}
		if ents, _ := filepath.Glob(filepath.Join(d, ".*.tmp")); len(ents) != 0 {
			t.Errorf("temporaries left: %v", ents)
		}
	}
}
