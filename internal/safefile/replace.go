//go:build linux

package safefile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Replacer is a regular file opened to be read and then replaced in place:
// the file a rewrite reads is the file it replaces, however long it takes
// between the two. The path is resolved once, at OpenReplace; later the
// file is reached only through the descriptors of it and of its directory,
// so a link swapped in meanwhile never redirects the write (WriteFile,
// which resolves the path when it writes, would follow it).
type Replacer struct {
	path   string      // as given
	target string      // the file the path named when opened
	dir    *os.File    // target's directory
	name   string      // target's name in dir
	f      *os.File    // target, open for reading
	st     fs.FileInfo // target when opened
}

// OpenReplace opens the regular file path names (following links, as
// WriteFile does) for a read and a replacement. Anything but a regular file
// is refused as Open refuses it, without waiting.
func OpenReplace(path string) (*Replacer, error) {
	target, err := Target(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	dir, err := os.OpenFile(filepath.Dir(target), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r := &Replacer{path: path, target: target, dir: dir, name: filepath.Base(target)}
	if err := r.open(); err != nil {
		dir.Close()
		return nil, err
	}
	return r, nil
}

// open opens r.name in r.dir without following a link, refusing a special
// file before opening it (opening some devices has effects) and after.
func (r *Replacer) open() error {
	var st unix.Stat_t
	err := unix.Fstatat(int(r.dir.Fd()), r.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return &fs.PathError{Op: "open", Path: r.path, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("open %s: %s became a symbolic link while it was opened; not read", r.path, r.target)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		fi, _ := os.Lstat(r.target)
		if fi != nil {
			return notRegular("read", r.path, fi.Mode())
		}
		return &Error{Op: "read", Path: r.path, Problem: "is not a regular file", Err: ErrNotRegular}
	}
	fd, err := unix.Openat(int(r.dir.Fd()), r.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: r.path, Err: err}
	}
	r.f = os.NewFile(uintptr(fd), r.target)
	if r.st, err = r.f.Stat(); err != nil {
		r.f.Close()
		return err
	}
	if !r.st.Mode().IsRegular() {
		r.f.Close()
		return notRegular("read", r.path, r.st.Mode())
	}
	return nil
}

// Target is the file the path named when it was opened: the one Replace
// replaces.
func (r *Replacer) Target() string { return r.target }

// Read reads the whole file through its descriptor, refusing one larger
// than limit (<= 0: DefaultLimit) as ReadFile does.
func (r *Replacer) Read(limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	tooLarge := &Error{Op: "read", Path: r.path, Problem: fmt.Sprintf("holds more than %d bytes; want at most %d", limit, limit), Err: ErrTooLarge}
	if r.st.Size() > limit {
		return nil, tooLarge
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(io.NewSectionReader(r.f, 0, limit+1), limit+1)); err != nil {
		return nil, &fs.PathError{Op: "read", Path: r.path, Err: err}
	}
	if int64(b.Len()) > limit {
		return nil, tooLarge
	}
	return b.Bytes(), nil
}

// Replace replaces the file read with data atomically (a temporary file
// beside it, synced, renamed over it, the directory synced), keeping its
// permission bits and owner as WriteFile does. It is refused, and nothing
// is written, when the name in the directory no longer holds the file that
// was opened (same device and inode): it was replaced, moved or swapped
// for a link meanwhile.
func (r *Replacer) Replace(data []byte) error {
	dirfd := int(r.dir.Fd())
	tmp, f, err := r.createTemp()
	if err != nil {
		return fmt.Errorf("write %s: %w", r.path, err)
	}
	err = fill(f, data, r.target, r.st)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.stillThere()
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, r.name)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("write %s: %w", r.path, err)
	}
	if err := r.dir.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(r.target), err)
	}
	return nil
}

// stillThere checks that r.name in r.dir is the file that was read.
func (r *Replacer) stillThere() error {
	var now unix.Stat_t
	if err := unix.Fstatat(int(r.dir.Fd()), r.name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s is gone since it was read (%w); not written", r.target, err)
	}
	was := r.st.Sys().(*syscall.Stat_t)
	if uint64(now.Dev) != uint64(was.Dev) || now.Ino != was.Ino {
		return fmt.Errorf("%s now names another file than the one read (a %s, inode %d, not inode %d); not written", r.target, modeName(now.Mode), now.Ino, was.Ino)
	}
	return nil
}

func modeName(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	}
	return "special file"
}

// createTemp creates an empty file beside the target, in its directory,
// with a fresh random name, with the target's permission bits.
func (r *Replacer) createTemp() (string, *os.File, error) {
	var fd int
	tmp, err := freshTemp(r.name, r.target, func(tmp string) (err error) {
		fd, err = unix.Openat(int(r.dir.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, uint32(r.st.Mode().Perm()))
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return tmp, os.NewFile(uintptr(fd), filepath.Join(filepath.Dir(r.target), tmp)), nil
}

// Close closes the file and its directory.
func (r *Replacer) Close() error {
	err := r.f.Close()
	if derr := r.dir.Close(); err == nil {
		err = derr
	}
	return err
}
