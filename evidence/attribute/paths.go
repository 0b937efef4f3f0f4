package attribute

import (
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func fsRefusal(op string, needs ...Need) *Refusal {
	return &Refusal{Layer: Filesystem, Op: op, Needs: needs,
		Reason: "Landlock governs this access; grantable once the control replay succeeds"}
}

// argFD reads descriptor argument i, its path lexically cleaned.
func argFD(c *strace.Call, i int) (strace.FD, bool) {
	if i < 0 || i >= len(c.Args) {
		return strace.FD{}, false
	}
	fd, ok := c.Args[i].FD()
	if fd.Path != "" {
		fd.Path = path.Clean(fd.Path)
	}
	return fd, ok
}

// path resolves the path argument pi of c against the directory descriptor
// argument di (-1: the working directory).
func (a *Attributor) path(c *strace.Call, di, pi int) (string, bool) {
	if pi >= len(c.Args) {
		return "", false
	}
	p, ok := c.Args[pi].Str()
	if !ok {
		return "", false
	}
	if p == "" {
		// AT_EMPTY_PATH: the descriptor itself.
		if fd, ok := argFD(c, di); ok && fd.Path != "" {
			return a.procSelf(c, fd.Path), true
		}
		return "", false
	}
	if !strings.HasPrefix(p, "/") {
		base := ""
		if fd, ok := argFD(c, di); ok {
			base = fd.Path
			if fd.Num == strace.ATFDCWD && base == "" {
				base = a.cwd[c.PID]
			}
		} else {
			base = a.cwd[c.PID]
		}
		if base == "" {
			return "", false
		}
		p = base + "/" + p
	}
	return a.procSelf(c, path.Clean(p)), true
}

// procSelf names the refusing process's own /proc entries by number.
func (a *Attributor) procSelf(c *strace.Call, p string) string {
	tgid := c.TGID
	if tgid == 0 {
		tgid = c.PID
	}
	if rest, ok := strings.CutPrefix(p, "/proc/self"); ok && (rest == "" || rest[0] == '/') {
		return "/proc/" + strconv.Itoa(tgid) + rest
	}
	if rest, ok := strings.CutPrefix(p, "/proc/thread-self"); ok && (rest == "" || rest[0] == '/') {
		return "/proc/" + strconv.Itoa(tgid) + "/task/" + strconv.Itoa(c.PID) + rest
	}
	return p
}

// pathRights attributes a KindPath call on p: its rights, or those of the
// first variant its flag argument carries, on p or p's parent.
func (a *Attributor) pathRights(c *strace.Call, call landlock.Syscall, p string) *Refusal {
	rights := call.Rights
	for _, v := range call.Variants {
		if argAt(c, call.Flags).HasFlag(v.Flag) {
			rights = v.Rights
			break
		}
	}
	if call.Object == landlock.Parent {
		p = path.Dir(p)
	}
	for _, r := range rights {
		if r.Section() == "" {
			return fixed(call.Op, "creating a device node is never granted (make_char and make_block have no section)")
		}
	}
	return fsRefusal(call.Op, NewNeed(p, rights...))
}

func argAt(c *strace.Call, i int) strace.Arg {
	if i < 0 || i >= len(c.Args) {
		return ""
	}
	return c.Args[i]
}

// openFlags reads the flags of an open call.
func openFlags(c *strace.Call, call landlock.Syscall) strace.Arg {
	if call.ImpliedFlags != "" {
		return strace.Arg(call.ImpliedFlags)
	}
	flags := argAt(c, call.Flags)
	if call.FlagsField != "" {
		flags, _ = flags.Field(call.FlagsField)
	}
	return flags
}

// reasonOPath is why an O_PATH open is not a refusal, and needs nothing.
const reasonOPath = "an O_PATH open needs no Landlock right"

func (a *Attributor) open(c *strace.Call, call landlock.Syscall, p string) *Refusal {
	flags := openFlags(c, call)
	if flags.HasFlag("O_PATH") {
		return other(reasonOPath)
	}
	if flags.HasFlag("O_TMPFILE") {
		return fsRefusal("create", NewNeed(p, landlock.MakeReg), NewNeed(p, landlock.WriteFile))
	}
	var rights []Right
	write := flags.HasFlag("O_WRONLY") || flags.HasFlag("O_RDWR")
	if !flags.HasFlag("O_WRONLY") {
		if flags.HasFlag("O_DIRECTORY") || a.isDir(p) {
			rights = append(rights, landlock.ReadDir)
		} else {
			rights = append(rights, landlock.ReadFile)
		}
	}
	if write {
		rights = append(rights, landlock.WriteFile)
	}
	if flags.HasFlag("O_CREAT") && !flags.HasFlag("O_EXCL") && !flags.HasFlag("O_NOFOLLOW") {
		p = a.followLinks(p)
	}
	if flags.HasFlag("O_CREAT") && !a.exists(p) {
		if !a.createHeld(path.Dir(p)) {
			// Landlock checks make_reg on the parent first; the new file's
			// access mode is checked right after, so name it too.
			return fsRefusal("create", NewNeed(path.Dir(p), landlock.MakeReg), NewNeed(p, rights...))
		}
		if a.gone[p] {
			// make_reg was held, so the open made a new file in place of
			// the one the run removed and was refused the new file's
			// access. A rule on the old file died with its inode: only
			// one on the directory grants the new file.
			p = path.Dir(p)
		}
	}
	op := "read"
	if write {
		op = "write"
	}
	if flags.HasFlag("O_TRUNC") {
		rights = append(rights, landlock.Truncate)
		op = "write"
	}
	return fsRefusal(op, NewNeed(p, rights...))
}

// trackGone records what a successful call removed or made again (gone).
func (a *Attributor) trackGone(c *strace.Call) {
	set := func(di, pi int, removed bool) {
		if p, ok := a.path(c, di, pi); ok {
			if removed {
				a.gone[p] = true
			} else {
				delete(a.gone, p)
			}
		}
	}
	switch c.Name {
	case "unlink", "rmdir":
		set(-1, 0, true)
	case "unlinkat":
		set(0, 1, true)
	case "rename":
		set(-1, 0, true)
		set(-1, 1, false)
	case "renameat", "renameat2":
		if argAt(c, 4).HasFlag("RENAME_EXCHANGE") {
			return // both names stay
		}
		set(0, 1, true)
		set(2, 3, false)
	case "open", "creat", "mkdir":
		set(-1, 0, false)
	case "openat", "mkdirat":
		set(0, 1, false)
	}
}

// followLinks follows p while it is a symlink, as an O_CREAT open without
// O_EXCL or O_NOFOLLOW does, and returns what the open creates or opens: a
// dangling link's target is created in the target's directory, which is
// what Landlock checks. Beyond 40 links (ELOOP) it returns p.
func (a *Attributor) followLinks(p string) string {
	cur := p
	for range 40 {
		fi, err := a.opts.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return cur
		}
		t, err := a.opts.Readlink(cur)
		if err != nil {
			return cur
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(cur), t)
		}
		cur = path.Clean(t)
	}
	return p
}

func (a *Attributor) createHeld(dir string) bool {
	return a.opts.CreateHeld != nil && a.opts.CreateHeld(dir)
}

func (a *Attributor) exists(p string) bool {
	if a.gone[p] {
		return false
	}
	_, err := a.opts.Lstat(p)
	return err == nil
}

func (a *Attributor) isDir(p string) bool {
	fi, err := a.opts.Lstat(p)
	return err == nil && fi.IsDir()
}

// makeRight is the make_* right creating an object like p needs, and the
// remove_* right removing it (p's kind now; a regular file when p is gone).
func (a *Attributor) makeRight(p string) (mk, rm Right) {
	fi, err := a.opts.Lstat(p)
	if err != nil {
		return landlock.MakeReg, landlock.RemoveFile
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return landlock.MakeDir, landlock.RemoveDir
	case m&fs.ModeSymlink != 0:
		return landlock.MakeSym, landlock.RemoveFile
	case m&fs.ModeNamedPipe != 0:
		return landlock.MakeFifo, landlock.RemoveFile
	case m&fs.ModeSocket != 0:
		return landlock.MakeSock, landlock.RemoveFile
	}
	return landlock.MakeReg, landlock.RemoveFile
}

// move attributes rename and link.
func (a *Attributor) move(c *strace.Call, call landlock.Syscall) *Refusal {
	src, ok1 := a.path(c, call.Dir, call.Path)
	dst, ok2 := a.path(c, call.Dir2, call.Path2)
	if !ok1 || !ok2 {
		return other("cannot resolve both paths of %s", c.Name)
	}
	sp, dp := path.Dir(src), path.Dir(dst)
	op := call.Op
	if c.Errno == "EXDEV" {
		if sp == dp {
			return other("EXDEV within one directory is not Landlock's (a real cross-device %s)", op)
		}
		r := fsRefusal(op, NewNeed(sp, landlock.Refer), NewNeed(dp, landlock.Refer))
		r.Reason = "Landlock answers EXDEV when the refer right is missing on either parent; grantable once the control replay finds both parents on one device"
		return r
	}
	mk, rm := a.makeRight(src)
	if op == "link" {
		return fsRefusal(op, NewNeed(dp, mk))
	}
	exchange := argAt(c, call.Flags).HasFlag("RENAME_EXCHANGE")
	srcNeed := NewNeed(sp, rm)
	dstNeed := NewNeed(dp, mk)
	if exchange {
		dmk, drm := a.makeRight(dst)
		srcNeed = sortedNeed(sp, rm, dmk)
		dstNeed = sortedNeed(dp, drm, mk)
	} else if a.exists(dst) {
		_, drm := a.makeRight(dst)
		dstNeed = sortedNeed(dp, drm, mk)
	}
	if sp == dp {
		return fsRefusal(op, mergeNeeds(srcNeed, dstNeed))
	}
	return fsRefusal(op, srcNeed, dstNeed)
}

// ResolveSymlinks is an Options.Resolve that names what Landlock sees: the
// longest existing prefix of p resolved through symlinks, the rest
// appended (a file the run failed to create does not exist). Paths under
// /proc and /dev are kept as written, as their links name per-process
// objects (/proc/self, /dev/fd, /dev/stdin).
func ResolveSymlinks(p string) string {
	if p == "/proc" || p == "/dev" || strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/dev/") {
		return p
	}
	rest := ""
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return path.Join(real, rest)
		}
		if cur == "/" || cur == "." {
			return p
		}
		rest = path.Join(path.Base(cur), rest)
		cur = path.Dir(cur)
	}
}

// fdCall attributes a call on a descriptor's file: ftruncate, ioctl.
func (a *Attributor) fdCall(c *strace.Call, call landlock.Syscall) *Refusal {
	fd, ok := argFD(c, 0)
	if !ok || fd.Path == "" {
		return other("%s on a descriptor without a path annotation", c.Name)
	}
	if slices.Contains(call.Rights, landlock.IoctlDev) {
		return a.ioctl(c, fd.Path)
	}
	return fsRefusal(call.Op, NewNeed(fd.Path, call.Rights...))
}
