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

// Resolution is what Walk found for a path.
type Resolution struct {
	// Target is the path once every symbolic link is followed.
	Target string
	// Links are the symbolic links followed on the way, each as the
	// link-free path of its directory and its name, in the order met.
	Links []string
}

// Resolve returns the path name leads to once every symbolic link in it is
// followed, as opening it would (Landlock's path rules hold the inode a row
// opens to). A component that does not exist ends the resolution: the rest
// is kept as written. Paths through /proc/self are kept as written. A path
// through a /proc magic link is a *MagicLinkError.
func Resolve(name string) (string, error) {
	r, err := Walk(name)
	return r.Target, err
}

// Walk is Resolve that also lists the links it followed.
func Walk(name string) (Resolution, error) {
	if !path.IsAbs(name) {
		return Resolution{}, fmt.Errorf("%q is not an absolute path", name)
	}
	var r Resolution
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
		if lexicalMagic(next) {
			return Resolution{}, &MagicLinkError{Path: name, Link: next}
		}
		if perProcess(next) {
			t, err := lexical(name, next, todo)
			r.Target = t
			return r, err
		}
		fi, err := os.Lstat(next)
		if err != nil {
			t, err := lexical(name, next, todo)
			r.Target = t
			return r, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if kernelMagic(next) {
			return Resolution{}, &MagicLinkError{Path: name, Link: next}
		}
		if links++; links > maxLinks {
			return Resolution{}, fmt.Errorf("%s: more than %d symbolic links (a loop?)", name, maxLinks)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return Resolution{}, fmt.Errorf("%s: %w", name, err)
		}
		r.Links = append(r.Links, next)
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	r.Target = cur
	return r, nil
}

// lexical finishes a resolution inside a per-process directory by the text
// alone (this process's entries are not the command's), refusing a magic
// link on the way.
func lexical(name, cur string, todo []string) (string, error) {
	for _, c := range todo {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		cur = path.Join(cur, c)
		if lexicalMagic(cur) {
			return "", &MagicLinkError{Path: name, Link: cur}
		}
	}
	return cur, nil
}
