package enforcer

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"golang.org/x/sys/unix"
)

// resolvePathRules fixes, in the parent, the path each rule of rs is opened
// by in the child (PathRule.Open): the rule's path with every symbolic link
// resolved (for a NoFollow rule, every link but the last component, which
// Compile checked is none), so that the child can open it allowing no link
// at all and a link swapped in after this check is refused, not followed.
// It refuses, all at once:
//   - a path that is or passes through a /proc magic link (/proc/self/root
//     is /, /proc/self/fd/N an open file): it names no place of its own;
//   - a path that passes through a symbolic link inside a directory the
//     same policy grants [create-symlink] on: a command run under the
//     policy could have made that link, and a grant must not widen from one
//     run to the next by what an earlier run left behind.
func resolvePathRules(rs *Ruleset) error {
	var problems []string
	links := make([][]string, len(rs.Paths))
	for i := range rs.Paths {
		open, l, err := resolveRule(rs.Paths[i])
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		rs.Paths[i].Open, links[i] = open, l
	}
	var makeSym []string
	for _, p := range rs.Paths {
		if p.Access&landlock.FSMakeSym != 0 && p.Open != "" {
			makeSym = append(makeSym, p.Open)
		}
	}
	for i, p := range rs.Paths {
		if m := madeLink(p.Path, links[i], makeSym); m != "" {
			problems = append(problems, m)
		}
	}
	if len(problems) > 0 {
		return &UnenforceableError{Problems: problems}
	}
	return nil
}

// resolveRule returns the link-free path p is opened by and the links
// followed to reach it.
func resolveRule(p PathRule) (string, []string, error) {
	walk := p.Path
	if p.NoFollow {
		walk = path.Dir(p.Path)
	}
	r, err := wide.Walk(walk)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	open := r.Target
	if p.NoFollow {
		open = path.Join(r.Target, path.Base(p.Path))
		// The last component: a magic link by its text, or a link now.
		again, err := wide.Walk(open)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		if again.Target != open {
			return "", nil, fmt.Errorf("%s became a symbolic link after it was checked; a section that changes files must name the target itself", p.Path)
		}
	}
	return open, r.Links, nil
}

// madeLink says how row passes through a link that a command could have
// made (one inside a directory of makeSym), or returns "".
func madeLink(row string, links, makeSym []string) string {
	for _, l := range links {
		for _, d := range makeSym {
			if policy.Within(path.Dir(l), d) {
				return fmt.Sprintf("%s passes through the symbolic link %s, which lies in %s where the policy grants [create-symlink]: "+
					"a command run under this policy could have made it, so the grant would follow what an earlier run left; name the target itself", row, l, d)
			}
		}
	}
	return ""
}

// addPathRule adds p to the ruleset fd, opening the path Compile and
// resolvePathRules checked with no symbolic link allowed anywhere in it
// (openat2 RESOLVE_NO_SYMLINKS, which implies RESOLVE_NO_MAGICLINKS): a
// component swapped for a link since the check would otherwise grant p's
// rights on the link's target. Such a swap is refused, naming the link.
func addPathRule(fd int, p PathRule) error {
	name := p.Open
	if name == "" {
		name = p.Path
	}
	name, err := ownProcPath(name)
	if err != nil {
		return fmt.Errorf("populating ruleset for %q: %w", p.Path, err)
	}
	pfd, err := openNoSymlinks(name)
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("populating ruleset for %q: %s", p.Path, swappedLink(name))
	}
	if err != nil {
		return fmt.Errorf("populating ruleset for %q: open %s: %w", p.Path, name, err)
	}
	defer unix.Close(pfd)
	attr := ll.PathBeneathAttr{AllowedAccess: p.Access, ParentFd: pfd}
	if err := ll.LandlockAddPathBeneathRule(fd, &attr, 0); err != nil {
		return fmt.Errorf("populating ruleset for %q with access %#x: %w", p.Path, p.Access, err)
	}
	return nil
}

// ownProcPath puts this process in place of /proc/self and
// /proc/thread-self, the one per-process link a resolved path keeps: the
// child becomes the command (execve in place), so its own entries are the
// command's. The process is read from the links themselves, so a /proc of
// another PID namespace still names this process there.
func ownProcPath(name string) (string, error) {
	for _, self := range []string{"/proc/self", "/proc/thread-self"} {
		rest, ok := strings.CutPrefix(name, self)
		if !ok || rest != "" && rest[0] != '/' {
			continue
		}
		who, err := os.Readlink(self)
		if err != nil {
			return "", err
		}
		return "/proc/" + who + rest, nil
	}
	return name, nil
}

// openNoSymlinks opens name with O_PATH, following no symbolic link. A
// kernel without openat2 (before 5.6), or a filter refusing it, gets the same from a walk opening one
// component at a time with O_NOFOLLOW.
func openNoSymlinks(name string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, name, &how)
	// A container's seccomp profile may answer EPERM for a system call
	// it does not know; the walk is as strict.
	if err != unix.ENOSYS && err != unix.EPERM {
		return fd, err
	}
	return walkNoSymlinks(name)
}

// walkNoSymlinks opens the absolute path name one component at a time,
// each with O_PATH|O_NOFOLLOW, failing with ELOOP at the first symbolic
// link.
func walkNoSymlinks(name string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, unix.ELOOP
		}
		fd = next
	}
	return fd, nil
}

// swappedLink names the symbolic link in name that stopped the open: a
// component that was no link when the policy was checked.
func swappedLink(name string) string {
	cur := "/"
	for _, c := range strings.Split(name, "/") {
		if c == "" {
			continue
		}
		cur = path.Join(cur, c)
		if fi, err := os.Lstat(cur); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(cur)
			return fmt.Sprintf("%s became a symbolic link (to %s) after the policy was checked (the rule opens %s): the paths changed shape, so refusing rather than granting the link's target", cur, target, name)
		}
	}
	return fmt.Sprintf("a component of %s was a symbolic link when it was opened (and none when the policy was checked): refusing rather than granting the link's target", name)
}
