package wide

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// maxLinks is how many symbolic links Resolve follows, as Linux's
// MAXSYMLINKS.
const maxLinks = 40

// perProcess are the /proc links whose target is whichever process follows
// them: under `lockstep run` the command itself, when its ruleset is built.
// Resolving them here would name this process, so Resolve keeps a path
// through them as written.
var perProcessDirs = []string{"/proc/self", "/proc/thread-self"}

func perProcess(p string) bool {
	for _, d := range perProcessDirs {
		if policy.Within(p, d) {
			return true
		}
	}
	return false
}

// Resolve returns the path name leads to once every symbolic link in it is
// followed, as opening it would (Landlock's path rules hold the inode a row
// opens to). A component that does not exist ends the resolution: the rest
// is kept as written. Paths through /proc/self are kept as written.
func Resolve(name string) (string, error) {
	if !path.IsAbs(name) {
		return "", fmt.Errorf("%q is not an absolute path", name)
	}
	todo := strings.Split(name, "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if perProcess(next) {
			return path.Join(append([]string{next}, todo...)...), nil
		}
		fi, err := os.Lstat(next)
		if err != nil {
			return path.Join(append([]string{next}, todo...)...), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: more than %d symbolic links (a loop?)", name, maxLinks)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}
