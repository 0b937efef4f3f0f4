package rootdigest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree makes a small root: a regular file, an executable, a symlink, a
// runtime-provided file, and files outside the scope.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"usr/bin/tool":     "#!/bin/sh\necho tool\n",
		"usr/lib/libx.so":  "\x7fELF fake",
		"etc/os-release":   "ID=debian\n",
		"etc/hosts":        "127.0.0.1 localhost\n",
		"var/tmp/scratch":  "not part of the root's content",
		"home/user/notes":  "neither",
		"usr/share/a b/c":  "a path with a space",
		"usr/share/a-b":    "sorts before a/ by name",
		"opt/empty/.keep":  "",
		"etc/ssl/private1": "secret",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "usr/bin/tool"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	return root
}

func digest(t *testing.T, root string) string {
	t.Helper()
	d, err := Of(root)
	if err != nil {
		t.Fatal(err)
	}
	if !Valid(d) {
		t.Fatalf("digest %q does not have the sha256:<hex> form", d)
	}
	return d
}

func TestManifestLines(t *testing.T) {
	root := tree(t)
	var b bytes.Buffer
	if err := Manifest(root, &b); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"/bin\tl\t0777\t\"usr/bin\"",
		"/etc\td\t0755",
		"/etc/os-release\tf\t0644\t10\t" + sha("ID=debian\n"),
		"/etc/ssl\td\t0755",
		"/etc/ssl/private1\tf\t0644\t6\t" + sha("secret"),
		"/opt\td\t0755",
		"/opt/empty\td\t0755",
		"/opt/empty/.keep\tf\t0644\t0\t" + sha(""),
		"/usr\td\t0755",
		"/usr/bin\td\t0755",
		"/usr/bin/tool\tf\t4755\t20\t" + sha("#!/bin/sh\necho tool\n"),
		"/usr/lib\td\t0755",
		"/usr/lib/libx.so\tf\t0644\t9\t" + sha("\x7fELF fake"),
		"/usr/share\td\t0755",
		"/usr/share/a b\td\t0755",
		"/usr/share/a b/c\tf\t0644\t19\t" + sha("a path with a space"),
		"/usr/share/a-b\tf\t0644\t23\t" + sha("sorts before a/ by name"),
	}, "\n") + "\n"
	if got := b.String(); got != want {
		t.Errorf("manifest:\n%s\nwant:\n%s", got, want)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var time0 = time.Unix(0, 0)

// TestDigestSeesContentNotMetadata: what a program reads changes the digest;
// ownership, times, runtime files and paths outside the scope do not.
func TestDigestSeesContentNotMetadata(t *testing.T) {
	base := digest(t, tree(t))
	if again := digest(t, tree(t)); again != base {
		t.Fatalf("two identical trees: %s and %s", base, again)
	}
	same := map[string]func(root string) error{
		"a runtime-provided /etc/hosts": func(r string) error {
			return os.WriteFile(filepath.Join(r, "etc/hosts"), []byte("10.0.0.1 other\n"), 0o644)
		},
		"a file outside the scope": func(r string) error {
			return os.WriteFile(filepath.Join(r, "var/tmp/scratch"), []byte("changed"), 0o644)
		},
		"modification times": func(r string) error {
			return os.Chtimes(filepath.Join(r, "usr/lib/libx.so"), time0, time0)
		},
		"a FIFO": func(r string) error { return syscall.Mkfifo(filepath.Join(r, "usr/lib/fifo"), 0o644) },
	}
	if os.Getuid() == 0 {
		same["ownership"] = func(r string) error { return os.Lchown(filepath.Join(r, "usr/lib/libx.so"), 1234, 1234) }
	}
	for name, change := range same {
		r := tree(t)
		if err := change(r); err != nil {
			t.Fatal(err)
		}
		if d := digest(t, r); d != base {
			t.Errorf("%s changed the digest", name)
		}
	}
	differs := map[string]func(root string) error{
		"one byte of a library": func(r string) error {
			return os.WriteFile(filepath.Join(r, "usr/lib/libx.so"), []byte("\x7fELF fakf"), 0o644)
		},
		"a mode": func(r string) error { return os.Chmod(filepath.Join(r, "usr/bin/tool"), 0o755) },
		"a symlink's target": func(r string) error {
			p := filepath.Join(r, "bin")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("/usr/bin", p)
		},
		"a new empty directory": func(r string) error { return os.Mkdir(filepath.Join(r, "usr/lib/python3.13"), 0o755) },
		"a removed file":        func(r string) error { return os.Remove(filepath.Join(r, "etc/os-release")) },
		"a file moved to another name": func(r string) error {
			return os.Rename(filepath.Join(r, "usr/share/a-b"), filepath.Join(r, "usr/share/a-c"))
		},
	}
	for name, change := range differs {
		r := tree(t)
		if err := change(r); err != nil {
			t.Fatal(err)
		}
		if d := digest(t, r); d == base {
			t.Errorf("%s left the digest unchanged", name)
		}
	}
}

func TestDigestNeedsADirectory(t *testing.T) {
	if _, err := Of(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing root has a digest")
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as root: %v, want 'not a directory'", err)
	}
}

func TestValid(t *testing.T) {
	good := Prefix + strings.Repeat("0a", 32)
	for s, want := range map[string]bool{
		good:                             true,
		strings.TrimPrefix(good, Prefix): false,
		good + "0":                       false,
		strings.ToUpper(good):            false,
		"":                               false,
		"sha512:" + good[7:]:             false,
	} {
		if Valid(s) != want {
			t.Errorf("Valid(%q) = %v, want %v", s, !want, want)
		}
	}
}
