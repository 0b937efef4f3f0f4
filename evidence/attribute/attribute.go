package attribute

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Options configures an Attributor. The zero value looks at the real file
// system and keeps paths lexical.
type Options struct {
	// Lstat reports what a path is now; it decides whether an O_CREAT open
	// created (the file is missing) and the kind of a renamed object. Zero:
	// os.Lstat. Attribute right after the run, before the working
	// directory is replaced.
	Lstat func(path string) (fs.FileInfo, error)
	// Readlink reads a symlink's target; with Lstat it follows the link an
	// O_CREAT open names to the file the open creates or opens (a dangling
	// link's create happens in its target's directory). Zero: os.Readlink.
	Readlink func(path string) (string, error)
	// Resolve maps a cleaned absolute path to the path a grant should
	// name (for example through symlinks, as Landlock sees inodes). Zero:
	// the path itself.
	Resolve func(path string) string
	// NestedDomains attributes refusals of threads inside a domain the
	// command stacked itself like any other. The enforcer's depth is what
	// the first restricting process stacked before it executed a program;
	// a deeper [strace.Call.Depth] is the command's own. Zero: such
	// refusals are Other, since the command's rules may be what refused.
	NestedDomains bool
	// CreateHeld reports whether the run's policy lets a regular file be
	// made in dir. Landlock checks make_reg on the parent before the new
	// file's access mode, so an O_CREAT open refused where make_reg was
	// held made the file and was refused its access: a write (or read)
	// refusal of the file, even when the file is gone by the time the
	// trace is read (a cold run's overlay is thrown away with the run, so
	// Lstat cannot tell). Zero: only Lstat decides.
	CreateHeld func(dir string) bool
}

// Attributor turns calls into refusals. Feed it every call of a trace in
// order with Observe: successful calls carry state (working directories,
// socket types) that later refusals need.
type Attributor struct {
	opts Options
	// base is the enforcer's depth: how many domains the first restricting
	// process stacked before it executed a program (baseTGID; frozen
	// once it has).
	base     int
	baseTGID int
	frozen   bool

	cwd     map[int]string
	sockets map[uint64]sockInfo
	fdSock  map[[2]int]sockInfo
	// gone holds the paths a successful call of the run removed (unlink,
	// rmdir, the old name of a rename) and no later one made again: Lstat
	// answers from before the run or from a tree the run did not touch (a
	// cold run's overlay is gone), so without it an O_CREAT open refused
	// after the build removed the file would count as a write of the file
	// instead of a create in its directory (rm -f Makefile; cp … Makefile).
	gone map[string]bool
}

// New returns an Attributor.
func New(opts Options) *Attributor {
	if opts.Lstat == nil {
		opts.Lstat = os.Lstat
	}
	if opts.Readlink == nil {
		opts.Readlink = os.Readlink
	}
	return &Attributor{
		opts:    opts,
		cwd:     make(map[int]string),
		sockets: make(map[uint64]sockInfo),
		fdSock:  make(map[[2]int]sockInfo),
		gone:    make(map[string]bool),
	}
}

// Refusals attributes a whole trace.
func Refusals(calls []*strace.Call, opts Options) []*Refusal {
	a := New(opts)
	var out []*Refusal
	for _, c := range calls {
		if r := a.Observe(c); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// Observe takes the next call of the trace and returns its refusal, or nil
// when the call is not one (a success, an ordinary error, a call outside
// the domain).
func (a *Attributor) Observe(c *strace.Call) *Refusal {
	a.track(c)
	if c.Kind != strace.Syscall || !c.Failed() || !c.InDomain {
		return nil
	}
	if r := a.limit(c); r != nil {
		return r
	}
	switch c.Errno {
	case "EACCES", "EPERM", "EXDEV":
	default:
		return nil
	}
	r := a.refusal(c)
	r.Call, r.Errno = c, c.Errno
	if r.Op == "" {
		r.Op = c.Name
	}
	if c.Depth > max(a.base, 1) && r.Layer.Grantable() && !a.opts.NestedDomains {
		r.Layer = Other
		r.Reason = fmt.Sprintf("refused inside a Landlock domain the command stacked itself (depth %d): its own rules may be what refused, and no policy lifts those", c.Depth)
	}
	return a.complete(r)
}

// track updates the state successful calls carry.
func (a *Attributor) track(c *strace.Call) {
	switch c.Kind {
	case strace.Superseded:
		if d, ok := a.cwd[c.Status]; ok {
			a.cwd[c.PID] = d
		}
		return
	case strace.Syscall:
	default:
		return
	}
	for _, arg := range c.Args {
		if strings.HasPrefix(string(arg), "AT_FDCWD<") {
			if fd, ok := arg.FD(); ok && fd.Path != "" {
				a.cwd[c.PID] = path.Clean(fd.Path)
			}
		}
	}
	if c.Failed() || c.Unfinished {
		return
	}
	switch c.Name {
	case "landlock_restrict_self":
		if c.Ret != "0" || a.frozen || a.baseTGID != 0 && a.baseTGID != c.TGID {
			return
		}
		if fd, ok := argFD(c, 0); ok && fd.Num == -1 {
			return
		}
		a.baseTGID = c.TGID
		a.base = max(a.base, c.Depth+1)
	case "execve", "execveat":
		if a.baseTGID != 0 && c.TGID == a.baseTGID {
			a.frozen = true
		}
	case "chdir":
		if p, ok := a.path(c, -1, 0); ok {
			a.cwd[c.PID] = p
		}
	case "unlink", "rmdir", "unlinkat", "rename", "renameat", "renameat2", "open", "openat", "creat", "mkdir", "mkdirat":
		a.trackGone(c)
	case "fchdir":
		if fd, ok := argFD(c, 0); ok && fd.Path != "" {
			a.cwd[c.PID] = fd.Path
		}
	case "clone", "clone3", "fork", "vfork":
		if child, ok := c.Result(); ok && child > 0 {
			if d, ok := a.cwd[c.PID]; ok {
				a.cwd[int(child)] = d
			}
		}
	case "socket":
		if len(c.Args) < 2 {
			return
		}
		s := sockInfo{family: string(c.Args[0])}
		switch {
		case c.Args[1].HasFlag("SOCK_STREAM"):
			s.transport = policy.TCP
		case c.Args[1].HasFlag("SOCK_DGRAM"):
			s.transport = policy.UDP
		}
		if fd, ok := c.RetFD(); ok {
			if fd.Inode != 0 {
				a.sockets[fd.Inode] = s
			}
			a.fdSock[[2]int{c.TGID, fd.Num}] = s
		}
	case "bind":
		if s, key, ok := a.socket(c); ok {
			s.bound = true
			a.store(key, c, s)
		}
	}
}

// limitCalls maps an errno to the limit it signals and the calls it
// signals it from.
var limitCalls = map[string]struct {
	key   policy.LimitKey
	calls []string
}{
	"EMFILE": {policy.NoFile, []string{"open", "openat", "openat2", "creat", "socket", "socketpair", "pipe", "pipe2",
		"dup", "dup2", "dup3", "accept", "accept4", "fcntl", "epoll_create", "epoll_create1", "eventfd", "eventfd2",
		"inotify_init", "inotify_init1", "memfd_create", "timerfd_create", "signalfd", "signalfd4", "pidfd_open",
		"open_tree", "fsopen", "fsmount", "userfaultfd", "perf_event_open", "landlock_create_ruleset", "recvmsg"}},
	"EAGAIN": {policy.NProc, []string{"clone", "clone3", "fork", "vfork"}},
	"ENOMEM": {policy.MemMB, []string{"mmap", "mremap", "brk", "clone", "clone3", "fork", "vfork", "execve", "execveat"}},
	"EFBIG": {policy.FsizeMB, []string{"write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "truncate",
		"fallocate", "copy_file_range", "sendfile", "splice", "open", "openat", "openat2", "creat"}},
}

func (a *Attributor) limit(c *strace.Call) *Refusal {
	l, ok := limitCalls[c.Errno]
	if !ok || !slices.Contains(l.calls, c.Name) {
		return nil
	}
	return &Refusal{Call: c, Layer: Limit, Op: c.Name, Limit: l.key, Errno: c.Errno, Port: -1,
		Reason: fmt.Sprintf("%s from %s is the %s limit's signature", c.Errno, c.Name, l.key)}
}

func other(format string, args ...any) *Refusal {
	return &Refusal{Layer: Other, Reason: fmt.Sprintf(format, args...)}
}

func fixed(op, format string, args ...any) *Refusal {
	return &Refusal{Layer: Fixed, Op: op, Reason: fmt.Sprintf(format, args...)}
}

// refusal attributes a refused call: lockstep's own fixed rules first,
// then what landlock.Syscalls says Landlock checks for it.
func (a *Attributor) refusal(c *strace.Call) *Refusal {
	switch c.Name {
	case "setsid", "setpgid":
		return fixed(c.Name, "%s is refused by the process-group lock whatever a policy says", c.Name)
	}
	if c.Errno == "EPERM" {
		r := other("EPERM is never Landlock's file or network refusal (scopes, ptrace, mounts and capabilities answer EPERM), so it never becomes a grant")
		r.Op = c.Name
		return r
	}
	if c.Name == "socket" || c.Name == "socketpair" {
		return fixed(c.Name, "creating a socket is refused by a fixed rule (raw, packet or unknown family)")
	}
	call, ok := landlock.Syscalls[c.Name]
	switch {
	case ok && call.Kind == landlock.KindMove:
		return a.move(c, call)
	case ok && call.Kind == landlock.KindAddr:
		return a.network(c, call)
	case ok && call.Kind == landlock.KindFD:
		return a.fdCall(c, call)
	case c.Errno == "EXDEV":
		return other("EXDEV from %s is not a Landlock refer refusal (only rename and link are)", c.Name)
	case !ok:
		return other("no Landlock right governs %s; the refusal comes from permissions, mount options or another security module", c.Name)
	}
	p, ok := a.path(c, call.Dir, call.Path)
	if !ok {
		return other("cannot resolve the path of %s (no -y annotation and no known working directory)", c.Name)
	}
	if call.Kind == landlock.KindOpen {
		return a.open(c, call, p)
	}
	return a.pathRights(c, call, p)
}
