package readroot

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tree writes a small repository-like tree: two files, a link to one of
// them, a link to a directory and a link leading out of the tree.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "repo")
	outside = filepath.Join(base, "java")
	for p, s := range map[string]string{
		"repo/org/a/1.0/a-1.0.pom": "<project/>\n",
		"repo/org/a/1.0/a-1.0.jar": "jar bytes",
		"java/b.jar":               "b's bytes",
	} {
		p = filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"repo/org/a/1.0/a.jar": "a-1.0.jar",
		"repo/org/a/debian":    "1.0",
		"repo/org/b.jar":       "../../java/b.jar",
	}
	for p, to := range links {
		if err := os.Symlink(to, filepath.Join(base, p)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestMakeVerify(t *testing.T) {
	root, _ := tree(t)
	m, err := Make(root)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range m {
		paths = append(paths, e.Path)
	}
	want := "org/a/1.0/a-1.0.jar org/a/1.0/a-1.0.pom org/a/1.0/a.jar org/b.jar"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("Make lists %s, want %s (a link to a directory is not followed)", got, want)
	}
	back, err := ParseManifest(m.Render())
	if err != nil {
		t.Fatalf("the rendered manifest does not parse: %v", err)
	}
	s, err := Verify(root, back)
	if err != nil {
		t.Fatal(err)
	}
	if s.Listed != 4 || s.Unlisted != 1 {
		t.Errorf("Verify = %+v, want 4 listed and 1 unlisted (the directory link)", s)
	}
	if err := os.WriteFile(filepath.Join(root, "org/new.pom"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Verify(root, back); err != nil || s.Unlisted != 2 {
		t.Errorf("Verify with a file added = %+v, %v; want it counted, not refused", s, err)
	}
}

// TestVerifyNamesTheFile: each way a listed file can stop matching is a
// MismatchError naming that file.
func TestVerifyNamesTheFile(t *testing.T) {
	cases := []struct {
		name, file, problem string
		change              func(root, outside string) error
	}{
		{"content changed", "org/a/1.0/a-1.0.pom", "has SHA-256", func(root, _ string) error {
			return os.WriteFile(filepath.Join(root, "org/a/1.0/a-1.0.pom"), []byte("<project><x/></project>\n"), 0o644)
		}},
		{"link target changed outside the tree", "org/b.jar", "has SHA-256", func(_, outside string) error {
			return os.WriteFile(filepath.Join(outside, "b.jar"), []byte("other"), 0o644)
		}},
		{"removed", "org/a/1.0/a-1.0.jar", "is missing", func(root, _ string) error {
			return os.Remove(filepath.Join(root, "org/a/1.0/a-1.0.jar"))
		}},
		{"replaced by a FIFO", "org/a/1.0/a-1.0.jar", "is not a regular file", func(root, _ string) error {
			p := filepath.Join(root, "org/a/1.0/a-1.0.jar")
			if err := os.Remove(p); err != nil {
				return err
			}
			return syscall.Mkfifo(p, 0o644)
		}},
		{"parent swapped for a link", "org/a/1.0/a-1.0.jar", "not below real directories", func(root, _ string) error {
			d := filepath.Join(root, "org/a/1.0")
			if err := os.Rename(d, d+".real"); err != nil {
				return err
			}
			return os.Symlink("1.0.real", d)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, outside := tree(t)
			m, err := Make(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.change(root, outside); err != nil {
				t.Fatal(err)
			}
			_, err = Verify(root, m)
			var me *MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("Verify = %v, want a MismatchError", err)
			}
			if me.Path != c.file || !strings.Contains(err.Error(), c.problem) || !strings.Contains(err.Error(), filepath.Join(root, c.file)) {
				t.Errorf("Verify = %v, want %s named with %q", err, c.file, c.problem)
			}
		})
	}
}

func TestVerifyRefusesSpecialFiles(t *testing.T) {
	root, _ := tree(t)
	m, err := Make(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "org/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(root, m); err == nil || !strings.Contains(err.Error(), "org/fifo is a named pipe") {
		t.Errorf("Verify with a FIFO in the tree = %v, want it refused by name", err)
	}
	if _, err := Make(root); err == nil {
		t.Error("Make with a FIFO in the tree succeeded")
	}
	if _, err := Verify(filepath.Join(root, "org/b.jar"), nil); err == nil || !strings.Contains(err.Error(), "want a directory") {
		t.Errorf("Verify of a link as the root = %v, want a refusal", err)
	}
}

func TestParseManifestRefuses(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	cases := map[string]string{
		"":                                     "empty",
		sum + "  a":                            "newline",
		sum + " a\n":                           "is not",
		strings.ToUpper(sum) + "  a\n":         "lower-case",
		sum + "  /etc/passwd\n":                "not a normal path",
		sum + "  ../x\n":                       "not a normal path",
		sum + "  a/./b\n":                      "not a normal path",
		sum + "  a\r\n":                        "carriage return",
		sum + "  b\n" + sum + "  a\n":          "sorted",
		sum + "  a\n" + sum + "  a\n":          "each path once",
		sum + "  a\n\n":                        "line 2",
		strings.Repeat("g", 64) + "  a\n":      "hex",
		sum[:62] + "  a\n":                     "is not",
		sum + "  a\n" + sum + "  a/b\x00c\n":   "NUL",
		sum + "  a\\b\n":                       "backslash",
		sum + "  a/b\n" + sum + "  a/b/../c\n": "not a normal path",
	}
	for in, want := range cases {
		if _, err := ParseManifest([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseManifest(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

// TestScriptMatchesMake: scripts/pin-manifest.sh (find and sha256sum)
// writes the bytes Make renders, for a tree with links.
func TestScriptMatchesMake(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum is not installed (apt-get install coreutils)")
	}
	root, _ := tree(t)
	m, err := Make(root)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("../../scripts/pin-manifest.sh", root).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(m.Render()) {
		t.Errorf("pin-manifest.sh wrote\n%s\nMake renders\n%s", out, m.Render())
	}
}
