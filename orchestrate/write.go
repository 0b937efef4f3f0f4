package orchestrate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// owned reports whether rel (a slash path inside the tree) is a file this
// merge writes or removes for the requested languages. Files it does not own
// (other languages' bases, anything a person put there) are carried over
// unchanged.
func owned(rel string, langs []string) bool {
	switch rel {
	case "BasePhobos.cfg", "TailPhobos.cfg", "debug/BasePhobosIntersect.cfg":
		return true
	}
	for _, l := range langs {
		c := Capitalised(l)
		if rel == "BaseLanguage-"+l+".cfg" || rel == "Abi10-"+l+".cfg" ||
			strings.HasPrefix(rel, "exercises/"+l+"_") ||
			rel == "debug/Base"+c+"Only.cfg" || rel == "debug/Base"+c+"Common.cfg" {
			return true
		}
	}
	return false
}

// stage names a point of writeTree for tests that stop it there.
type stage string

const (
	stageBuilt     stage = "built"     // the new tree is complete in its temporary sibling
	stageExchanged stage = "exchanged" // the new tree is in place, the old one in the sibling
)

// writeTree replaces the tree at root with files (plus the files of the old
// tree this merge does not own) atomically: it builds the new tree in a
// temporary sibling, syncs it, and exchanges the two directories with
// renameat2(RENAME_EXCHANGE). hook, if not nil, is called at each stage.
func writeTree(root string, files []output, langs []string, hook func(stage) error) (err error) {
	root = filepath.Clean(root)
	parent, name := filepath.Dir(root), filepath.Base(root)
	fi, err := os.Lstat(root)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("inspect %s: %w", root, err)
	case exists && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link; give the directory it points to", root)
	case exists && !fi.IsDir():
		return fmt.Errorf("%s is not a directory; want the output tree's directory", root)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	unlock, err := lockTree(parent, name)
	if err != nil {
		return err
	}
	defer unlock()
	// Temporaries of a writer that crashed: only writers holding the lock
	// make them, so none is in use now.
	stale, _ := filepath.Glob(filepath.Join(parent, "."+name+".lockstep-*"))
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return fmt.Errorf("remove %s, left by a crashed merge: %w", s, err)
		}
	}
	tmp, err := os.MkdirTemp(parent, "."+name+".lockstep-*")
	if err != nil {
		return fmt.Errorf("create a temporary sibling of %s: %w", root, err)
	}
	defer func() {
		// After a successful exchange tmp holds the old tree; either way it goes.
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fmt.Errorf("remove the previous tree at %s: %w", tmp, rerr)
		}
	}()
	if exists {
		if err := carryOver(root, tmp, langs); err != nil {
			return err
		}
		if err := keepDir(tmp, fi); err != nil {
			return err
		}
	} else if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"exercises", "debug"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := writeSynced(filepath.Join(tmp, filepath.FromSlash(f.path)), f.data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	if err := syncDirs(tmp); err != nil {
		return err
	}
	if hook != nil {
		if err := hook(stageBuilt); err != nil {
			return err
		}
	}
	if !exists {
		if err := os.Rename(tmp, root); err != nil {
			return fmt.Errorf("move the new tree into place at %s: %w", root, err)
		}
		return syncDir(parent)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, root, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("exchange %s with the new tree (renameat2 RENAME_EXCHANGE; the file system must support it): %w", root, err)
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	if hook != nil {
		if err := hook(stageExchanged); err != nil {
			return err
		}
	}
	return nil
}

// lockTree takes an exclusive lock on <parent>/.<name>.lock, so that two
// merges never write one tree at once.
func lockTree(parent, name string) (func(), error) {
	p := filepath.Join(parent, "."+name+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the lock %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another merge is writing %s (lock %s held): %w", filepath.Join(parent, name), p, err)
	}
	return func() { f.Close() }, nil
}

// carryOver puts the entries of the old tree that the merge does not own
// into tmp. A file or a symbolic link is hard-linked: it stays the same file,
// so its contents, owner, mode (set-ID bits too), times and its other hard
// links are kept, and nothing is read or copied. A directory is made anew
// with the old one's owner, mode and times (set once it is filled).
func carryOver(root, tmp string, langs []string) error {
	type dir struct {
		path string
		info fs.FileInfo
	}
	var dirs []dir
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		slash := filepath.ToSlash(rel)
		dst := filepath.Join(tmp, rel)
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			dirs = append(dirs, dir{dst, info})
			return os.Mkdir(dst, 0o700)
		case owned(slash, langs):
			return nil
		case d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0:
			// os.Link does not follow a symbolic link: the link itself is linked.
			if err := os.Link(p, dst); err != nil {
				return fmt.Errorf("keep %s in the new tree: %w (it is hard-linked, so it stays the same file; a file of another owner needs root, and a mount point inside the tree cannot be kept)", slash, err)
			}
			return nil
		}
		return fmt.Errorf("%s holds %s, which is neither a file, a directory nor a link; remove it", root, slash)
	})
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := keepDir(d.path, d.info); err != nil {
			return err
		}
	}
	return nil
}

func sameOwner(fi fs.FileInfo, want *syscall.Stat_t) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == want.Uid && st.Gid == want.Gid
}

// keepDir gives the directory dst the owner, mode and times of old. The
// owner goes first: a chown may clear set-ID bits.
func keepDir(dst string, old fs.FileInfo) error {
	want, ok := old.Sys().(*syscall.Stat_t)
	if have, err := os.Lstat(dst); ok && err == nil && !sameOwner(have, want) {
		if err := os.Lchown(dst, int(want.Uid), int(want.Gid)); err != nil {
			return fmt.Errorf("keep the owner %d:%d of directory %s: %w (a directory of another owner needs root)", want.Uid, want.Gid, old.Name(), err)
		}
	}
	if err := os.Chmod(dst, old.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return os.Chtimes(dst, old.ModTime(), old.ModTime())
}

func writeSynced(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDirs(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return syncDir(p)
	})
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
