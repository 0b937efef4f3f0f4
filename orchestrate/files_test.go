package orchestrate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCarryOverKeepsFiles puts someone's files into the output tree, merges,
// and checks each is still the same file: contents, owner, mode with its
// set-ID bits, modification time, and its hard links.
func TestCarryOverKeepsFiles(t *testing.T) {
	e := newEnv(t)
	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	notes := filepath.Join(e.core, "notes")
	if err := os.Mkdir(notes, 0o755); err != nil {
		t.Fatal(err)
	}
	tool, twin, outside := filepath.Join(notes, "tool"), filepath.Join(e.core, "tool-twin"), filepath.Join(filepath.Dir(e.core), "outside")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{twin, outside} {
		if err := os.Link(tool, l); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(e.core, "latest")
	if err := os.Symlink("notes/tool", link); err != nil {
		t.Fatal(err)
	}
	if root {
		for _, p := range []string{tool, notes} {
			if err := os.Chown(p, 12345, 23456); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Lchown(link, 12345, 23456); err != nil {
			t.Fatal(err)
		}
	}
	// After the chown, which clears set-ID bits.
	if err := os.Chmod(tool, 0o4750|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(notes, 0o2750|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tool, notes} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]fs.FileInfo{}
	for _, p := range []string{tool, twin, notes, link} {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		want[p] = st
	}

	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	for p, w := range want {
		got, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s after the merge: %v", p, err)
			continue
		}
		if got.Mode() != w.Mode() {
			t.Errorf("%s mode = %v, want %v kept", p, got.Mode(), w.Mode())
		}
		if !got.ModTime().Equal(w.ModTime()) && got.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s modification time = %v, want %v kept", p, got.ModTime(), w.ModTime())
		}
		g, ws := got.Sys().(*syscall.Stat_t), w.Sys().(*syscall.Stat_t)
		if g.Uid != ws.Uid || g.Gid != ws.Gid {
			t.Errorf("%s owner = %d:%d, want %d:%d kept", p, g.Uid, g.Gid, ws.Uid, ws.Gid)
		}
	}
	a, _ := os.Stat(tool)
	for _, l := range []string{twin, outside} {
		if b, err := os.Stat(l); err != nil || !os.SameFile(a, b) {
			t.Errorf("%s is no longer a hard link of %s: %v", l, tool, err)
		}
	}
	if b, err := os.ReadFile(tool); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("%s = %q, %v; want its contents kept", tool, b, err)
	}
	if s := siblings(t, e.core); len(s) != 0 {
		t.Errorf("temporaries left: %v", s)
	}
}

// TestCoreDirHoldingWorkDir refuses an output tree that is or holds the
// current directory (--core-dir . or ..), before the lock is taken, so no
// lock file and no temporary is left in or beside the tree (treeHash
// covers the tree's own entries).
func TestCoreDirHoldingWorkDir(t *testing.T) {
	e := newEnv(t)
	if _, err := Run(e.opts()); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, e.core)
	parent := filepath.Dir(e.core)
	listing := func() string {
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range ents {
			names = append(names, d.Name())
		}
		return strings.Join(names, " ")
	}
	beside := listing() // the first merge's lock file is there by design
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, tc := range []struct{ cwd, core string }{
		{e.core, "."},
		{filepath.Join(e.core, "exercises"), ".."},
		{e.core, "../core"},
		{filepath.Join(e.core, "debug"), e.core},
	} {
		if err := os.Chdir(tc.cwd); err != nil {
			t.Fatal(err)
		}
		o := e.opts()
		o.CoreDir = tc.core
		_, err := Run(o)
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(strings.Join(r.Problems, "\n"), "is or holds the current directory") {
			t.Errorf("Run with --core-dir %s from %s = %v; want a refusal naming the current directory", tc.core, tc.cwd, err)
		}
		if treeHash(t, e.core) != before {
			t.Errorf("--core-dir %s from %s changed the tree", tc.core, tc.cwd)
		}
		if now := listing(); now != beside {
			t.Errorf("--core-dir %s from %s left files beside the tree: %s, want %s", tc.core, tc.cwd, now, beside)
		}
	}
}
