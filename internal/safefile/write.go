package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxLinks bounds the symbolic links WriteFile follows, as the kernel's
// ELOOP limit does.
const maxLinks = 40

// Target is the file a write to path replaces: path itself, or, when path
// is a symbolic link, the file at the end of its chain of links (which need
// not exist yet). Directories along the way are left to the kernel.
func Target(path string) (string, error) {
	p := path
	for range maxLinks {
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		link, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(p), link)
		}
		p = link
	}
	return "", &fs.PathError{Op: "write", Path: path, Err: syscall.ELOOP}
}

// WriteFile replaces the file at path with data atomically: data goes to a
// temporary file in the same directory, which is synced and renamed over the
// target, and the directory is synced. When path is a symbolic link, the
// link stays and its target is replaced (see Target). A file that is
// replaced keeps its permission bits and its owner; a write that cannot keep
// the owner (someone else's file, and not root) is refused and the file left
// as it was. Set-user-ID and set-group-ID bits are dropped, as the kernel
// drops them when a file is written. A new file gets perm (less the umask).
// A target that exists and is not a regular file is refused.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	target, err := Target(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	old, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return fmt.Errorf("write %s: %w", path, err)
	case !old.Mode().IsRegular():
		return notRegular("write", target, old.Mode())
	}
	f, tmp, err := createTemp(target, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = fill(f, data, target, old)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(target))
}

// fill writes data, gives the file old's mode and owner (old nil: a new
// file), and syncs it.
func fill(f *os.File, data []byte, target string, old fs.FileInfo) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	if old != nil {
		if err := f.Chmod(old.Mode().Perm()); err != nil {
			return err
		}
		if err := keepOwner(f, target, old); err != nil {
			return err
		}
	}
	return f.Sync()
}

// createTemp creates an empty file beside target with a fresh random name
// (.<name>.<hex>.tmp), created with perm so the umask applies as it would to
// target itself.
func createTemp(target string, perm fs.FileMode) (*os.File, string, error) {
	dir, name := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	var f *os.File
	tmp, err := freshTemp(name, target, func(tmp string) (err error) {
		f, err = os.OpenFile(filepath.Join(dir, tmp), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOCTTY, perm)
		return err
	})
	return f, filepath.Join(dir, tmp), err
}

// freshTemp calls create with temporary names for name
// (.<name>.<hex>.tmp, within NAME_MAX) until one does not exist yet, and
// returns the name it created.
func freshTemp(name, target string, create func(tmp string) error) (string, error) {
	// Keep the temporary name within NAME_MAX (255 bytes).
	if len(name) > 200 {
		name = name[:200]
	}
	for range 100 {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", err
		}
		tmp := "." + name + "." + hex.EncodeToString(r[:]) + ".tmp"
		err := create(tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return tmp, err
	}
	return "", fmt.Errorf("no free temporary name beside %s", target)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// OpenAppend opens path for appending, creating it with perm when it does
// not exist; an existing path must be a regular file (a symbolic link is
// followed). It never waits: a FIFO is refused, not opened for a reader to
// come. Callers that must not fail after a point of no return open first.
func OpenAppend(path string, perm fs.FileMode) (*os.File, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, notRegular("append to", path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular("append to", path, st.Mode())
	}
	return f, nil
}
