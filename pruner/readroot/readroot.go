package readroot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Entry is one manifest line.
type Entry struct {
	// SHA256 is the file's sum, 64 lower-case hex digits.
	SHA256 string
	// Path is relative to the root, slash-separated and lexically normal.
	Path string
}

// Manifest is a parsed manifest, sorted by path.
type Manifest []Entry

// maxManifest bounds a manifest file: ample for a distribution's Maven
// repository (about 100 bytes a line).
const maxManifest = 64 << 20

// ParseManifest reads a manifest; the error names the first bad line.
func ParseManifest(data []byte) (Manifest, error) {
	if len(data) == 0 {
		return nil, errors.New("the manifest is empty; want one line per pinned file")
	}
	if data[len(data)-1] != '\n' {
		return nil, errors.New("the manifest does not end in a newline")
	}
	var m Manifest
	for i, line := range strings.Split(string(data[:len(data)-1]), "\n") {
		e, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("manifest line %d: %w", i+1, err)
		}
		if n := len(m); n > 0 && m[n-1].Path >= e.Path {
			return nil, fmt.Errorf("manifest line %d: %q is not after %q; want each path once, sorted", i+1, e.Path, m[n-1].Path)
		}
		m = append(m, e)
	}
	return m, nil
}

func parseLine(line string) (Entry, error) {
	sum, rel, ok := strings.Cut(line, "  ")
	if !ok || len(sum) != 64 {
		return Entry{}, fmt.Errorf("%q is not \"<sha256>  <path>\"", line)
	}
	if _, err := hex.DecodeString(sum); err != nil || strings.ToLower(sum) != sum {
		return Entry{}, fmt.Errorf("%q is not 64 lower-case hex digits", sum)
	}
	if err := checkRel(rel); err != nil {
		return Entry{}, err
	}
	return Entry{SHA256: sum, Path: rel}, nil
}

// checkRel refuses a path that could leave the root or that a line cannot
// carry.
func checkRel(rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("path %q is not a normal path inside the root", rel)
	}
	if strings.ContainsAny(rel, "\r\x00\\") {
		return fmt.Errorf("path %q holds a carriage return, NUL or backslash", rel)
	}
	return nil
}

// Render writes m in the manifest format.
func (m Manifest) Render() []byte {
	var b bytes.Buffer
	for _, e := range m {
		fmt.Fprintf(&b, "%s  %s\n", e.SHA256, e.Path)
	}
	return b.Bytes()
}

// ReadManifest reads and parses the manifest file at p.
func ReadManifest(p string) (Manifest, error) {
	data, err := safefile.ReadFile(p, maxManifest)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

// Make hashes every file of the tree at root: every regular file, and every
// symbolic link that leads to one (hashed through the link). A link to a
// directory is not followed.
func Make(root string) (Manifest, error) {
	var m Manifest
	err := walk(root, func(rel string, regular bool) error {
		if !regular {
			return nil
		}
		sum, err := hashFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		m = append(m, Entry{SHA256: sum, Path: rel})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(m, func(i, j int) bool { return m[i].Path < m[j].Path })
	return m, nil
}

// walk calls fn for every file of the tree at root that is not a
// directory, with its slash-separated path relative to root and whether it
// is (or a symbolic link leads to) a regular file. A device, FIFO or socket
// refuses the tree.
func walk(root string, fn func(rel string, regular bool) error) error {
	st, err := os.Lstat(root)
	if err != nil {
		return fmt.Errorf("pinned read root: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("pinned read root %s is %s; want a directory", root, safefile.Kind(st.Mode()))
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			st, err := os.Stat(p)
			if err != nil {
				return fn(rel, false) // a dangling link: counted, never read
			}
			mode = st.Mode().Type()
			if st.IsDir() {
				return fn(rel, false)
			}
		}
		if !mode.IsRegular() {
			return fmt.Errorf("pinned read root %s: %s is %s; want only directories and regular files", root, rel, safefile.Kind(mode))
		}
		return fn(rel, true)
	})
}

func hashFile(p string) (string, error) {
	f, err := safefile.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReaderSize(f, 1<<16)); err != nil {
		return "", fmt.Errorf("hashing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Summary is what Verify found.
type Summary struct {
	// Listed is the number of manifest entries, all verified.
	Listed int `json:"listed"`
	// Unlisted counts the files of the tree the manifest does not name.
	Unlisted int `json:"unlisted"`
}

// MismatchError names the first listed file that does not match.
type MismatchError struct {
	Root, Path string
	// Problem says how: another sum, missing, not a regular file.
	Problem string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("pinned read root %s: %s %s; the tree no longer matches its manifest", e.Root, path.Join(e.Root, e.Path), e.Problem)
}

// Verify re-hashes every file m lists beneath root and counts the files it
// does not list. The first file that differs is a *MismatchError.
func Verify(root string, m Manifest) (Summary, error) {
	listed := make(map[string]bool, len(m))
	for _, e := range m {
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		if err := verifyEntry(root, p, e); err != nil {
			return Summary{}, err
		}
		listed[e.Path] = true
	}
	s := Summary{Listed: len(m)}
	err := walk(root, func(rel string, _ bool) error {
		if !listed[rel] {
			s.Unlisted++
		}
		return nil
	})
	return s, err
}

func verifyEntry(root, p string, e Entry) error {
	// Each parent must be a real directory: a link on the way could swap
	// the tree's contents for files the manifest never saw.
	for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
		st, err := os.Lstat(filepath.Join(root, filepath.FromSlash(d)))
		if err != nil || !st.IsDir() {
			return &MismatchError{Root: root, Path: e.Path, Problem: "is not below real directories (" + d + " is not one)"}
		}
	}
	sum, err := hashFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &MismatchError{Root: root, Path: e.Path, Problem: "is missing"}
	case errors.Is(err, safefile.ErrNotRegular):
		return &MismatchError{Root: root, Path: e.Path, Problem: "is not a regular file"}
	case err != nil:
		return fmt.Errorf("pinned read root %s: %w", root, err)
	case sum != e.SHA256:
		return &MismatchError{Root: root, Path: e.Path, Problem: fmt.Sprintf("has SHA-256 %s, the manifest says %s", sum, e.SHA256)}
	}
	return nil
}
