package enforcer

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// readOnlyExcept binds each writable path onto itself (outermost first, so
// a path beneath another rides on its bind) and makes every other mount
// point read-only. With / writable nothing is made read-only.
func readOnlyExcept(writable []string) error {
	paths := slices.Clone(writable)
	sort.Strings(paths) // a parent sorts before what is beneath it
	if slices.Contains(paths, "/") {
		return nil
	}
	var bound []string
	for _, p := range paths {
		if beneathAny(p, bound) {
			continue
		}
		if err := bindOntoItself(p); err != nil {
			return err
		}
		bound = append(bound, p)
	}
	mps, err := mountPoints()
	if err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, mp := range mps {
		if beneathAny(mp, bound) {
			continue
		}
		// Non-recursive: each mount keeps its other flags (nosuid,
		// nodev, noexec), and the binds below stay writable.
		err := unix.MountSetattr(unix.AT_FDCWD, mp, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, &attr)
		switch {
		case err == nil, err == unix.ENOENT, err == unix.ENOTDIR:
			// A mount point that cannot be reached by its path cannot
			// be reached by the command either.
		default:
			return fmt.Errorf("make %s read-only (mount_setattr, Linux 5.12+): %w", mp, err)
		}
	}
	return nil
}

// bindOntoItself makes path (a directory or a regular file) a mount of its
// own (with what is mounted beneath it), which stays writable. The path,
// link-free since the policy was checked, is opened following no link
// (openNoSymlinks) and bound through /proc/self/fd, so a link swapped in
// since is never followed; such a path is left alone here, and the
// Landlock rule for it is refused (addPathRule).
func bindOntoItself(path string) error {
	fd, err := openNoSymlinks(path)
	if err == unix.ENOENT || err == unix.ELOOP {
		return nil // gone or a link since the check: it grants nothing either
	}
	if err != nil {
		return fmt.Errorf("open %s to keep it writable: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return nil
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO, unix.S_IFSOCK:
		// Written, opened and connected to on a read-only mount as
		// well. And a bind of /dev/ptmx would break it: the kernel
		// finds the devpts instance as "pts" beside ptmx on the same
		// mount, and without one hands out ptys of its internal
		// instance, which /dev/pts does not show (openpty: ENOENT).
		return nil
	}
	via := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(via, via, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s onto itself to keep it writable: %w", path, err)
	}
	return nil
}

// beneathAny reports whether p is one of dirs or beneath one.
func beneathAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// mountPoints lists the distinct mount points of /proc/self/mountinfo, in
// its order.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list the mounts: %w", err)
	}
	ms, err := mountinfo.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("list the mounts: %w", err)
	}
	return distinctPoints(ms), nil
}

// distinctPoints lists the mount points of ms, each once, in order.
func distinctPoints(ms []mountinfo.Mount) []string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m.Point) {
			out = append(out, m.Point)
		}
	}
	return out
}
