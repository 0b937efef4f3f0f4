package enforcer

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// linkWorkspace makes d/ws/build/lib (a directory) and d/outside/lib/f
// holding "original", the directory a link may lead to.
func linkWorkspace(t *testing.T) (d, ws, victim string) {
	t.Helper()
	d = t.TempDir()
	ws = filepath.Join(d, "ws")
	for _, dir := range []string{filepath.Join(ws, "build", "lib"), filepath.Join(d, "outside", "lib")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim = filepath.Join(d, "outside", "lib", "f")
	if err := os.WriteFile(victim, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d, ws, victim
}

// TestRestrictRefusesSwappedIntermediateSymlink is two real runs of one
// policy granting [create][delete][create-symlink] on ws and [write] on
// ws/build/lib. The first replaces ws/build with a link to a directory
// outside the grants; the second would have written there through the
// grant on ws/build/lib (only its last component was opened without
// following a link). Now the second run is refused (125) naming the row
// and the link, and the file outside stays as it was.
func TestRestrictRefusesSwappedIntermediateSymlink(t *testing.T) {
	needHostLandlock(t)
	d, ws, victim := linkWorkspace(t)
	lib := filepath.Join(ws, "build", "lib")
	cfg := baseRules + "[read]\n" + ws + "\n[create]\n" + ws + "\n[delete]\n" + ws + "\n[create-symlink]\n" + ws + "\n[write]\n" + lib + "\n"
	first := runUnder(t, cfg, nil, "/bin/sh", "-c", "rm -r "+filepath.Join(ws, "build")+" && ln -s ../outside "+filepath.Join(ws, "build"))
	if first.status != 0 {
		t.Fatalf("first run = %d, %v, %s; want 0 (it only changes ws)", first.status, first.err, first.stderr)
	}
	second := runUnder(t, cfg, nil, "/bin/sh", "-c", "echo pwned > "+filepath.Join(lib, "f"))
	if got, _ := os.ReadFile(victim); string(got) != "original" {
		t.Errorf("the second run wrote %q into %s, outside the grants", got, victim)
	}
	msg := ""
	if second.err != nil {
		msg = second.err.Error()
	}
	if second.status != StatusRefused || !strings.Contains(msg, lib) || !strings.Contains(msg, filepath.Join(ws, "build")) || !strings.Contains(msg, "[create-symlink]") {
		t.Errorf("second run = %d, %q; want 125 naming the row %s and the link %s/build", second.status, msg, lib, ws)
	}
	_ = d
}

// TestRestrictRefusesSwappedComponent swaps a directory in the middle of a
// checked grant for a link between the check (Prepare) and the child's
// open (restrictSelf): the open follows no link, and the refusal names the
// link.
func TestRestrictRefusesSwappedComponent(t *testing.T) {
	needHostLandlock(t)
	d, ws, _ := linkWorkspace(t)
	for _, section := range []string{"write", "read"} {
		t.Run(section, func(t *testing.T) {
			lib := filepath.Join(ws, "build", "lib")
			if err := os.MkdirAll(lib, 0o755); err != nil {
				t.Fatal(err)
			}
			prep, err := Prepare(Options{Policy: mustParse(t, "["+section+"]\n"+lib+"\n")})
			if err != nil {
				t.Fatal(err)
			}
			build := filepath.Join(ws, "build")
			if err := os.RemoveAll(build); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(d, "outside"), build); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(build)
			errc := make(chan error)
			go func() {
				runtime.LockOSThread() // never unlocked: the restricted thread dies with the goroutine
				errc <- restrictSelf(prep.Ruleset)
			}()
			if err := <-errc; err == nil || !strings.Contains(err.Error(), build+" became a symbolic link") {
				t.Errorf("restrictSelf after %s became a link = %v; want a refusal naming the link", build, err)
			}
		})
	}
}

// TestPathRulesKeepCheckedLinks: a link that is in the policy's paths when
// it is checked, outside any [create-symlink] grant (/lib64 -> usr/lib64 on
// merged-/usr systems), still works: the rule opens what it resolved to.
func TestPathRulesKeepCheckedLinks(t *testing.T) {
	needHostLandlock(t)
	d := t.TempDir()
	real := filepath.Join(d, "usr", "lib64")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib64", filepath.Join(d, "lib64")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(d, "lib64", "out")
	if err := os.Mkdir(filepath.Join(real, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := baseRules + "[read]\n" + filepath.Join(d, "lib64") + "\n[write]\n" + out + "\n[create]\n" + out + "\n"
	r := runUnder(t, cfg, nil, "/bin/sh", "-c", "cat "+filepath.Join(d, "lib64", "f")+" && echo ok > "+filepath.Join(out, "g"))
	if r.status != 0 || r.stdout != "data" {
		t.Errorf("run through checked links = %d, %v, %q, %q; want 0 and the file", r.status, r.err, r.stdout, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(real, "out", "g")); string(got) != "ok\n" {
		t.Errorf("the write through %s left %q", out, got)
	}
}

// TestWalkNoSymlinks is the walk a kernel without openat2 uses: it opens a
// link-free path and refuses one with a link anywhere in it.
func TestWalkNoSymlinks(t *testing.T) {
	d, ws, _ := linkWorkspace(t)
	fd, err := walkNoSymlinks(filepath.Join(ws, "build", "lib"))
	if err != nil {
		t.Fatalf("walkNoSymlinks of a plain path: %v", err)
	}
	unix.Close(fd)
	if err := os.Symlink(filepath.Join(d, "outside"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ws, "link"), filepath.Join(ws, "link", "lib")} {
		if fd, err := walkNoSymlinks(p); err != unix.ELOOP {
			unix.Close(fd)
			t.Errorf("walkNoSymlinks(%s) = %v; want ELOOP", p, err)
		}
	}
}
