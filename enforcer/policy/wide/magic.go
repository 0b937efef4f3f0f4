package wide

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// magicEntries are the entries of a /proc/<pid> or task directory that are
// magic links: the kernel follows them not to the text readlink shows but
// to the process's root or working directory, its executable, an open
// file, a mapped file or a namespace. A value true means the entry is a
// directory of such links (fd/3), false that it is one itself (root).
var magicEntries = map[string]bool{
	"root":      false,
	"cwd":       false,
	"exe":       false,
	"fd":        true,
	"map_files": true,
	"ns":        true,
}

// MagicLinkError says that a path resolves through a /proc magic link:
// opened, it would name whatever that process's root, working directory or
// open file is (`/proc/self/root` is `/`), not a place the text shows.
type MagicLinkError struct {
	Path string // the path resolved
	Link string // the magic link met on the way
}

func (e *MagicLinkError) Error() string {
	if e.Link == e.Path {
		return fmt.Sprintf("%s is a /proc magic link: it names whatever that process's root, working directory or open file is when it is opened, not what its text shows", e.Path)
	}
	return fmt.Sprintf("%s resolves through the /proc magic link %s: it names whatever that process's root, working directory or open file is when it is opened, not what its text shows", e.Path, e.Link)
}

// IsMagicLink reports whether err is (or wraps) a *MagicLinkError.
func IsMagicLink(err error) bool {
	var m *MagicLinkError
	return errors.As(err, &m)
}

// lexicalMagic reports whether p names a magic link of procfs at /proc by
// its text alone: /proc/<pid|self>/{root,cwd,exe}, /proc/<pid|self>/fd/N,
// map_files/… and ns/…, the same under task/<tid>/ and /proc/thread-self/.
// The text is enough wherever the policy is judged, even for a process
// that does not exist there.
func lexicalMagic(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	switch {
	case parts[0] == "thread-self":
		parts = parts[1:]
	case parts[0] == "self" || allDigits(parts[0]):
		parts = parts[1:]
		if len(parts) >= 2 && parts[0] == "task" {
			parts = parts[2:]
		}
	default:
		return false
	}
	if len(parts) == 0 {
		return false
	}
	dir, ok := magicEntries[parts[0]]
	return ok && (!dir || len(parts) >= 2)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// kernelMagic asks the kernel whether the symbolic link p (every component
// before it already resolved) is a magic link: opening it with
// RESOLVE_NO_MAGICLINKS fails with ELOOP where an ordinary open does not.
// This catches a procfs mounted elsewhere than /proc. Only a link on
// procfs is asked about, since the open follows the whole chain and a plain
// link to /proc/self/fd/0 would fail the same way (Walk meets the magic
// link itself later). A kernel without openat2 (before 5.6) answers false;
// lexicalMagic still holds there.
func kernelMagic(p string) bool {
	lfd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	var sfs unix.Statfs_t
	err = unix.Fstatfs(lfd, &sfs)
	unix.Close(lfd)
	if err != nil || sfs.Type != unix.PROC_SUPER_MAGIC {
		return false
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	if err == nil {
		unix.Close(fd)
		return false
	}
	if err != unix.ELOOP {
		return false
	}
	how.Resolve = 0
	fd, err = unix.Openat2(unix.AT_FDCWD, p, &how)
	if err == nil {
		unix.Close(fd)
		return true
	}
	return err != unix.ELOOP
}

// MagicPath returns the /proc magic link the absolute, lexically normal
// path p is or passes through, by its text alone ("" when none): how a
// policy made on another machine (a pruned exercise policy) is judged.
func MagicPath(p string) string {
	cur := ""
	for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		cur += "/" + c
		if lexicalMagic(cur) {
			return cur
		}
	}
	return ""
}
