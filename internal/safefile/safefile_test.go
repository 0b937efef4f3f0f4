//go:build unix

package safefile

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within fails t when f does not return in a few seconds: a refusal that
// waits for a FIFO's writer is the bug these tests look for.
func within[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return in 5 s: it waits on the file", what)
	}
	panic("unreachable")
}

// specials makes one of each file that is not a regular file.
func specials(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	link := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink("fifo", link); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		fifo:        "a named pipe",
		sock:        "a socket",
		"/dev/zero": "a character device",
		dir:         "a directory",
		link:        "a named pipe",
	}
}

func TestReadFileRefusesSpecialFiles(t *testing.T) {
	for path, kind := range specials(t) {
		data, err := within(t, "ReadFile("+path+")", func() ([]byte, error) { return ReadFile(path, 0) })
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrNotRegular) || data != nil {
			t.Errorf("ReadFile(%s) = %d bytes, %v; want an *Error wrapping ErrNotRegular", path, len(data), err)
			continue
		}
		if want := "read " + path + ": is " + kind + "; want a regular file"; err.Error() != want {
			t.Errorf("ReadFile(%s) error = %q, want %q", path, err, want)
		}
	}
}

func TestReadFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ten")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("ReadFile(10 bytes, limit 10) = %q, %v", b, err)
	}
	if b, err := ReadFile(p, 9); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "holds more than 9 bytes; want at most 9") {
		t.Errorf("ReadFile(10 bytes, limit 9) = %q, %v; want ErrTooLarge", b, err)
	}
	// A /proc file says its size is 0: the limit holds on what is read.
	if b, err := ReadFile("/proc/self/status", 0); err != nil || !bytes.Contains(b, []byte("Pid:")) {
		t.Errorf("ReadFile(/proc/self/status) = %q, %v", b, err)
	}
	if _, err := ReadFile("/proc/self/status", 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile(/proc/self/status, 10) = %v, want ErrTooLarge", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "gone"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestOpenAppendRefusesSpecialFiles(t *testing.T) {
	for path, kind := range specials(t) {
		f, err := within(t, "OpenAppend("+path+")", func() (*os.File, error) { return OpenAppend(path, 0o644) })
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "is "+kind+"; want a regular file") {
			t.Errorf("OpenAppend(%s) = %v, %v; want ErrNotRegular naming %s", path, f, err, kind)
		}
		if f != nil {
			f.Close()
		}
	}
	p := filepath.Join(t.TempDir(), "summary.md")
	for _, line := range []string{"a\n", "b\n"} {
		f, err := OpenAppend(p, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if b, _ := os.ReadFile(p); string(b) != "a\nb\n" {
		t.Errorf("two appends = %q, want a, b", b)
	}
}

func TestWriteFileKeepsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "p.cfg")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	// A chain: link2 → link1 → real/p.cfg, each relative.
	link1, link2 := filepath.Join(dir, "link1"), filepath.Join(dir, "link2")
	if err := os.Symlink("real/p.cfg", link1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("link1", link2); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link2, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{link1, link2} {
		if st, err := os.Lstat(l); err != nil || st.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s after WriteFile: %v, %v; want it still a symbolic link", l, st.Mode(), err)
		}
	}
	st, err := os.Stat(real)
	if b, _ := os.ReadFile(real); string(b) != "new" || err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("target after WriteFile through links = %q, mode %v, %v; want \"new\", 0640", b, st.Mode(), err)
	}
	// A dangling link: the target is created, the link kept.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("real/created", dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dangling, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "real", "created")); string(b) != "x" || err != nil {
		t.Errorf("dangling link's target = %q, %v", b, err)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "real", ".*.tmp")); len(ents) != 0 {
		t.Errorf("temporaries left: %q", ents)
	}
}

func TestWriteFileKeepsModeAndOwner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o4751); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(p, 12345, 23456); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	// The set-user-ID bit goes, as a write drops it; the rest stays.
	if st.Mode() != 0o751 {
		t.Errorf("mode after WriteFile = %v, want -rwxr-x--x", st.Mode())
	}
	if sys := st.Sys().(*syscall.Stat_t); root && (sys.Uid != 12345 || sys.Gid != 23456) {
		t.Errorf("owner after WriteFile = %d:%d, want 12345:23456 kept", sys.Uid, sys.Gid)
	}
}

func TestWriteFileRefusesSpecialTargets(t *testing.T) {
	for path, kind := range specials(t) {
		if path == "/dev/zero" {
			continue // never replace a device, even in a test that expects a refusal
		}
		_, err := within(t, "WriteFile("+path+")", func() (struct{}, error) { return struct{}{}, WriteFile(path, []byte("x"), 0o644) })
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "is "+kind+"; want a regular file") {
			t.Errorf("WriteFile(%s) = %v; want ErrNotRegular naming %s", path, err, kind)
		}
		if st, lerr := os.Lstat(path); lerr != nil || st.Mode().IsRegular() {
			t.Errorf("%s after a refused WriteFile: %v, %v; want it untouched", path, st, lerr)
		}
	}
}

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	for _, content := range []string{"one\n", "two\n"} {
		if err := WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != content {
			t.Errorf("after WriteFile(%q): %q, %v", content, got, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %d entries after two writes, want 1", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "a.json"), nil, 0o644); err == nil {
		t.Errorf("WriteFile into a missing folder = nil error")
	}
	// A new file gets perm less the umask, as os.WriteFile gives it.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	n := filepath.Join(dir, "new")
	if err := WriteFile(n, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(n); err != nil || st.Mode() != 0o644 {
		t.Errorf("new file mode = %v, %v; want -rw-r--r-- (0666 less umask 022)", st.Mode(), err)
	}
}
