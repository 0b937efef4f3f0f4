package engine

import (
	"os"
	"path"
	"strconv"
	"strings"
)

// maxLinks is how many symlinks one path walk may follow before the kernel
// gives up with ELOOP (its MAXSYMLINKS).
const maxLinks = 40

// Readlink reads a symlink's target, as os.Readlink does; an error means
// the name is no symlink (or is missing), so a walk takes it as it is.
type Readlink func(name string) (string, error)

// KernelPath names the object the kernel resolved when process tgid
// (thread tid) walked p: the spelling its audit record carries. The walk
// follows every symlink readlink reports, as the kernel does, with
// /proc/self and /proc/thread-self meaning the walking process and not
// the one that reads the links afterwards (so /proc/mounts, a link to
// self/mounts, becomes /proc/<tgid>/mounts). Below a process's own
// directory (/proc/<pid>/…) nothing is read: its links (fd/N, cwd, exe,
// root) are magic, named by that process's state, which is gone when the
// run is compared. A dangling link resolves to its target (what a create
// through it makes); a walk that meets more than 40 links (ELOOP: the
// kernel resolved nothing) returns p as it was written.
func KernelPath(p string, tgid, tid int, readlink Readlink) string {
	if readlink == nil {
		readlink = os.Readlink
	}
	todo := strings.Split(p, "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch {
		case c == "" || c == ".":
			continue
		case c == "..":
			cur = path.Dir(cur)
			continue
		case cur == "/proc" && c == "self":
			cur = "/proc/" + strconv.Itoa(tgid)
			continue
		case cur == "/proc" && c == "thread-self":
			cur = "/proc/" + strconv.Itoa(tgid) + "/task/" + strconv.Itoa(tid)
			continue
		}
		next := path.Join(cur, c)
		if inProcessDir(next) {
			cur = next
			continue
		}
		target, err := readlink(next)
		if err != nil {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return p
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur
}

// inProcessDir reports whether p lies inside one process's /proc directory
// (/proc/<pid>/…, not the directory itself).
func inProcessDir(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	pid, sub, ok := strings.Cut(rest, "/")
	if !ok || sub == "" {
		return false
	}
	_, err := strconv.Atoi(pid)
	return err == nil
}
