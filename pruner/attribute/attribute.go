package attribute

import (
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/strace"
)

// Layer names what refused a call.
type Layer string

// The layers. Only Filesystem and Network refusals can become grants.
const (
	Filesystem Layer = "filesystem"
	Network    Layer = "network"
	Fixed      Layer = "fixed"
	Limit      Layer = "limit"
	Other      Layer = "other"
)

// Grantable reports whether a policy can lift a refusal of this layer.
func (l Layer) Grantable() bool { return l == Filesystem || l == Network }

// Right is a Landlock access right, spelled as the kernel's audit records
// spell their blockers, so a refusal compares directly with a record. A
// refusal lists every right the call needs; a record's blockers are only
// the missing ones, a subset of them.
type Right string

// The rights (security/landlock/audit.c).
const (
	Execute        Right = "fs.execute"
	WriteFile      Right = "fs.write_file"
	ReadFile       Right = "fs.read_file"
	ReadDir        Right = "fs.read_dir"
	RemoveDir      Right = "fs.remove_dir"
	RemoveFile     Right = "fs.remove_file"
	MakeChar       Right = "fs.make_char"
	MakeDir        Right = "fs.make_dir"
	MakeReg        Right = "fs.make_reg"
	MakeSock       Right = "fs.make_sock"
	MakeFifo       Right = "fs.make_fifo"
	MakeBlock      Right = "fs.make_block"
	MakeSym        Right = "fs.make_sym"
	Refer          Right = "fs.refer"
	Truncate       Right = "fs.truncate"
	IoctlDev       Right = "fs.ioctl_dev"
	ResolveUnix    Right = "fs.resolve_unix"
	BindTCP        Right = "net.bind_tcp"
	ConnectTCP     Right = "net.connect_tcp"
	BindUDP        Right = "net.bind_udp"
	ConnectSendUDP Right = "net.connect_send_udp"
)

// Need is what one object needs: sections of a policy, and the rights they
// stand for, on one path.
type Need struct {
	Path     string
	Sections []policy.Section
	Rights   []Right
}

// NetNeed is one network rule a refusal needs.
type NetNeed struct {
	// Section is policy.Bind or policy.Connect.
	Section policy.Section
	// Addr is the destination (connect) or local (bind) address, if printed.
	Addr netip.Addr
	// Port is the port; 0 for a bind to a kernel-chosen port.
	Port      int
	Transport policy.Transport
	Right     Right
}

// Refusal is one refused call and what it proves.
type Refusal struct {
	// Call is the refused call.
	Call *strace.Call
	// Layer is what refused it; only Filesystem and Network are grantable.
	Layer Layer
	// Op is the operation: read, write, create, delete, rename, link,
	// execute, truncate, ioctl, bind, connect, send, or the limit's call.
	Op string
	// Needs lists each object with its sections (Filesystem).
	Needs []Need
	// Paths, Sections and Rights summarise Needs: every object, and the
	// union of sections (in the policy's canonical order) and rights.
	Paths    []string
	Sections []policy.Section
	Rights   []Right
	// Net lists the network rules (Network); Addr, Port and Transport are
	// its first, and Port is -1 when there is none.
	Net       []NetNeed
	Addr      netip.Addr
	Port      int
	Transport policy.Transport
	// Limit is the limit hit (Limit).
	Limit policy.LimitKey
	// Errno is the call's error.
	Errno string
	// Detail adds what the layer rests on (an ioctl request, a family).
	Detail string
	// Reason says in one sentence why the refusal is in its layer, or why it
	// can never be granted.
	Reason string
}

// String renders the refusal on one line.
func (r *Refusal) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Layer, r.Op, r.Errno)
	for _, n := range r.Needs {
		fmt.Fprintf(&b, " %s%v", n.Path, n.Sections)
	}
	for _, n := range r.Net {
		fmt.Fprintf(&b, " [%s] %s:%d %s", n.Section, n.Addr, n.Port, n.Transport)
	}
	if r.Limit != "" {
		fmt.Fprintf(&b, " %s", r.Limit)
	}
	if r.Call != nil {
		fmt.Fprintf(&b, " (line %d, pid %d)", r.Call.Line, r.Call.PID)
	}
	return b.String()
}

// Options configures an Attributor. The zero value looks at the real file
// system and keeps paths lexical.
type Options struct {
	// Lstat reports what a path is now; it decides whether an O_CREAT open
	// created (the file is missing) and the kind of a renamed object. Zero:
	// os.Lstat. Attribute right after the run, before the working
	// directory is replaced.
	Lstat func(path string) (fs.FileInfo, error)
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
}

type sockInfo struct {
	family    string
	transport policy.Transport
	bound     bool
}

// New returns an Attributor.
func New(opts Options) *Attributor {
	if opts.Lstat == nil {
		opts.Lstat = os.Lstat
	}
	return &Attributor{
		opts:    opts,
		cwd:     make(map[int]string),
		sockets: make(map[uint64]sockInfo),
		fdSock:  make(map[[2]int]sockInfo),
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
	if r.Port == 0 && len(r.Net) == 0 {
		r.Port = -1
	}
	if r.Layer == Filesystem {
		if a.opts.Resolve != nil {
			for i := range r.Needs {
				r.Needs[i].Path = a.opts.Resolve(r.Needs[i].Path)
			}
		}
		r.summarise()
	}
	return r
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
		a.trackRestrict(c)
	case "execve", "execveat":
		if a.baseTGID != 0 && c.TGID == a.baseTGID {
			a.frozen = true
		}
	case "chdir":
		if p, ok := a.path(c, -1, 0); ok {
			a.cwd[c.PID] = p
		}
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
		a.trackSocket(c)
	case "bind":
		if s, key, ok := a.socket(c); ok {
			s.bound = true
			a.store(key, c, s)
		}
	}
}

// trackRestrict takes a landlock_restrict_self of the enforcer's thread
// group before it executes the command: the domain the command starts in.
func (a *Attributor) trackRestrict(c *strace.Call) {
	if c.Ret != "0" || a.frozen || a.baseTGID != 0 && a.baseTGID != c.TGID {
		return
	}
	if fd, ok := argFD(c, 0); ok && fd.Num == -1 {
		return
	}
	a.baseTGID = c.TGID
	a.base = max(a.base, c.Depth+1)
}

// trackSocket remembers a new socket's family and transport, by inode and
// by descriptor.
func (a *Attributor) trackSocket(c *strace.Call) {
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
}

// socket finds what is known of the socket in a call's first argument.
func (a *Attributor) socket(c *strace.Call) (sockInfo, uint64, bool) {
	if len(c.Args) == 0 {
		return sockInfo{}, 0, false
	}
	fd, ok := c.Args[0].FD()
	if !ok {
		return sockInfo{}, 0, false
	}
	var s sockInfo
	found := false
	if fd.Inode != 0 {
		s, found = a.sockets[fd.Inode]
	}
	if !found {
		s, found = a.fdSock[[2]int{c.TGID, fd.Num}]
	}
	// -yy names the protocol itself.
	switch strings.TrimSuffix(fd.Proto, "v6") {
	case "TCP":
		s.transport, found = policy.TCP, true
	case "UDP", "UDPLITE":
		s.transport, found = policy.UDP, true
	}
	return s, fd.Inode, found
}

func (a *Attributor) store(inode uint64, c *strace.Call, s sockInfo) {
	if inode != 0 {
		a.sockets[inode] = s
	}
	if fd, ok := c.Args[0].FD(); ok {
		a.fdSock[[2]int{c.TGID, fd.Num}] = s
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
	switch c.Name {
	case "rename", "renameat", "renameat2", "link", "linkat":
		return a.move(c)
	case "connect", "sendto", "sendmsg", "sendmmsg", "bind":
		return a.network(c)
	case "socket", "socketpair":
		return fixed(c.Name, "creating a socket is refused by a fixed rule (raw, packet or unknown family)")
	case "ioctl":
		return a.ioctl(c)
	case "ftruncate":
		fd, ok := argFD(c, 0)
		if !ok || fd.Path == "" {
			return other("ftruncate on a descriptor without a path annotation")
		}
		return fsRefusal("truncate", Need{Path: fd.Path, Sections: []policy.Section{policy.Write}, Rights: []Right{Truncate}})
	}
	if c.Errno == "EXDEV" {
		return other("EXDEV from %s is not a Landlock refer refusal (only rename and link are)", c.Name)
	}
	return a.pathCall(c)
}

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

// pathArgs gives, per path call, the directory descriptor argument (-1 for
// none) and the path argument.
var pathArgs = map[string][2]int{
	"open": {-1, 0}, "creat": {-1, 0}, "openat": {0, 1}, "openat2": {0, 1},
	"mkdir": {-1, 0}, "mkdirat": {0, 1}, "mknod": {-1, 0}, "mknodat": {0, 1},
	"symlink": {-1, 1}, "symlinkat": {1, 2},
	"unlink": {-1, 0}, "unlinkat": {0, 1}, "rmdir": {-1, 0},
	"truncate": {-1, 0}, "execve": {-1, 0}, "execveat": {0, 1},
}

func (a *Attributor) pathCall(c *strace.Call) *Refusal {
	idx, ok := pathArgs[c.Name]
	if !ok {
		return other("no Landlock right governs %s; the refusal comes from permissions, mount options or another security module", c.Name)
	}
	p, ok := a.path(c, idx[0], idx[1])
	if !ok {
		return other("cannot resolve the path of %s (no -y annotation and no known working directory)", c.Name)
	}
	parent := path.Dir(p)
	switch c.Name {
	case "open", "openat", "openat2", "creat":
		return a.open(c, p)
	case "mkdir", "mkdirat":
		return fsRefusal("create", Need{Path: parent, Sections: []policy.Section{policy.Create}, Rights: []Right{MakeDir}})
	case "mknod", "mknodat":
		mode := argAt(c, idx[1]+1)
		switch {
		case mode.HasFlag("S_IFCHR") || mode.HasFlag("S_IFBLK"):
			return fixed("create", "creating a device node is never granted (make_char and make_block have no section)")
		case mode.HasFlag("S_IFIFO"):
			return fsRefusal("create", Need{Path: parent, Sections: []policy.Section{policy.CreateIPC}, Rights: []Right{MakeFifo}})
		case mode.HasFlag("S_IFSOCK"):
			return fsRefusal("create", Need{Path: parent, Sections: []policy.Section{policy.CreateIPC}, Rights: []Right{MakeSock}})
		}
		return fsRefusal("create", Need{Path: parent, Sections: []policy.Section{policy.Create}, Rights: []Right{MakeReg}})
	case "symlink", "symlinkat":
		return fsRefusal("create", Need{Path: parent, Sections: []policy.Section{policy.CreateSymlink}, Rights: []Right{MakeSym}})
	case "unlink", "unlinkat":
		if argAt(c, 2).HasFlag("AT_REMOVEDIR") {
			return fsRefusal("delete", Need{Path: parent, Sections: []policy.Section{policy.Delete}, Rights: []Right{RemoveDir}})
		}
		return fsRefusal("delete", Need{Path: parent, Sections: []policy.Section{policy.Delete}, Rights: []Right{RemoveFile}})
	case "rmdir":
		return fsRefusal("delete", Need{Path: parent, Sections: []policy.Section{policy.Delete}, Rights: []Right{RemoveDir}})
	case "truncate":
		return fsRefusal("truncate", Need{Path: p, Sections: []policy.Section{policy.Write}, Rights: []Right{Truncate}})
	case "execve", "execveat":
		return fsRefusal("execute", Need{Path: p, Sections: []policy.Section{policy.Execute, policy.Read}, Rights: []Right{Execute, ReadFile}})
	}
	return other("no Landlock right governs %s", c.Name)
}

func argAt(c *strace.Call, i int) strace.Arg {
	if i < 0 || i >= len(c.Args) {
		return ""
	}
	return c.Args[i]
}

func (a *Attributor) open(c *strace.Call, p string) *Refusal {
	var flags strace.Arg
	switch c.Name {
	case "open":
		flags = argAt(c, 1)
	case "openat":
		flags = argAt(c, 2)
	case "openat2":
		flags, _ = argAt(c, 2).Field("flags")
	case "creat":
		flags = "O_WRONLY|O_CREAT|O_TRUNC"
	}
	if flags.HasFlag("O_PATH") {
		return other("an O_PATH open needs no Landlock right")
	}
	if flags.HasFlag("O_TMPFILE") {
		return fsRefusal("create",
			Need{Path: p, Sections: []policy.Section{policy.Create}, Rights: []Right{MakeReg}},
			Need{Path: p, Sections: []policy.Section{policy.Write}, Rights: []Right{WriteFile}})
	}
	var sections []policy.Section
	var rights []Right
	write := flags.HasFlag("O_WRONLY") || flags.HasFlag("O_RDWR")
	read := !flags.HasFlag("O_WRONLY")
	if read {
		sections = append(sections, policy.Read)
		if flags.HasFlag("O_DIRECTORY") || a.isDir(p) {
			rights = append(rights, ReadDir)
		} else {
			rights = append(rights, ReadFile)
		}
	}
	if write {
		sections = append(sections, policy.Write)
		rights = append(rights, WriteFile)
	}
	if flags.HasFlag("O_CREAT") && !a.exists(p) {
		// Landlock checks make_reg on the parent first; the new file's
		// access mode is checked right after, so name it too.
		return fsRefusal("create",
			Need{Path: path.Dir(p), Sections: []policy.Section{policy.Create}, Rights: []Right{MakeReg}},
			Need{Path: p, Sections: sections, Rights: rights})
	}
	op := "read"
	if write {
		op = "write"
	}
	if flags.HasFlag("O_TRUNC") {
		if !write {
			sections = append(sections, policy.Write)
		}
		rights = append(rights, Truncate)
		op = "write"
	}
	return fsRefusal(op, Need{Path: p, Sections: sections, Rights: rights})
}

func (a *Attributor) exists(p string) bool {
	_, err := a.opts.Lstat(p)
	return err == nil
}

func (a *Attributor) isDir(p string) bool {
	fi, err := a.opts.Lstat(p)
	return err == nil && fi.IsDir()
}

// makeRight is the make_* right and section creating an object like p
// needs (p's kind now; a regular file when p is gone).
func (a *Attributor) makeRight(p string) (policy.Section, Right, Right) {
	fi, err := a.opts.Lstat(p)
	if err != nil {
		return policy.Create, MakeReg, RemoveFile
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return policy.Create, MakeDir, RemoveDir
	case m&fs.ModeSymlink != 0:
		return policy.CreateSymlink, MakeSym, RemoveFile
	case m&fs.ModeNamedPipe != 0:
		return policy.CreateIPC, MakeFifo, RemoveFile
	case m&fs.ModeSocket != 0:
		return policy.CreateIPC, MakeSock, RemoveFile
	}
	return policy.Create, MakeReg, RemoveFile
}

// move attributes rename and link.
func (a *Attributor) move(c *strace.Call) *Refusal {
	var src, dst string
	var ok1, ok2 bool
	switch c.Name {
	case "rename", "link":
		src, ok1 = a.path(c, -1, 0)
		dst, ok2 = a.path(c, -1, 1)
	default:
		src, ok1 = a.path(c, 0, 1)
		dst, ok2 = a.path(c, 2, 3)
	}
	if !ok1 || !ok2 {
		return other("cannot resolve both paths of %s", c.Name)
	}
	sp, dp := path.Dir(src), path.Dir(dst)
	link := strings.HasPrefix(c.Name, "link")
	op := "rename"
	if link {
		op = "link"
	}
	if c.Errno == "EXDEV" {
		if sp == dp {
			return other("EXDEV within one directory is not Landlock's (a real cross-device %s)", op)
		}
		r := fsRefusal(op,
			Need{Path: sp, Sections: []policy.Section{policy.Restructure}, Rights: []Right{Refer}},
			Need{Path: dp, Sections: []policy.Section{policy.Restructure}, Rights: []Right{Refer}})
		r.Reason = "Landlock answers EXDEV when the refer right is missing on either parent; grantable once the control replay finds both parents on one device"
		return r
	}
	sec, mk, rm := a.makeRight(src)
	if link {
		return fsRefusal(op, Need{Path: dp, Sections: []policy.Section{sec}, Rights: []Right{mk}})
	}
	exchange := argAt(c, 4).HasFlag("RENAME_EXCHANGE")
	srcNeed := Need{Path: sp, Sections: []policy.Section{policy.Delete}, Rights: []Right{rm}}
	dstNeed := Need{Path: dp, Sections: []policy.Section{sec}, Rights: []Right{mk}}
	if exchange {
		dsec, dmk, drm := a.makeRight(dst)
		srcNeed = Need{Path: sp, Sections: sortSections(policy.Delete, dsec), Rights: []Right{rm, dmk}}
		dstNeed = Need{Path: dp, Sections: sortSections(policy.Delete, sec), Rights: []Right{drm, mk}}
	} else if a.exists(dst) {
		_, _, drm := a.makeRight(dst)
		dstNeed = Need{Path: dp, Sections: sortSections(policy.Delete, sec), Rights: []Right{drm, mk}}
	}
	if sp == dp {
		return fsRefusal(op, mergeNeeds(srcNeed, dstNeed))
	}
	return fsRefusal(op, srcNeed, dstNeed)
}

func mergeNeeds(a, b Need) Need {
	return Need{Path: a.Path, Sections: sortSections(append(slices.Clone(a.Sections), b.Sections...)...),
		Rights: uniqRights(append(slices.Clone(a.Rights), b.Rights...))}
}

func uniqRights(rs []Right) []Right {
	var out []Right
	for _, r := range rs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// sortSections returns the distinct sections in the policy's canonical
// order (filesystem sections first, then connect, bind).
func sortSections(ss ...policy.Section) []policy.Section {
	order := append(slices.Clone(policy.FilesystemSections), policy.Connect, policy.Bind)
	var out []policy.Section
	for _, o := range order {
		if slices.Contains(ss, o) {
			out = append(out, o)
		}
	}
	return out
}

// summarise fills Paths, Sections and Rights from Needs.
func (r *Refusal) summarise() {
	var secs []policy.Section
	for _, n := range r.Needs {
		if !slices.Contains(r.Paths, n.Path) {
			r.Paths = append(r.Paths, n.Path)
		}
		secs = append(secs, n.Sections...)
		r.Rights = uniqRights(append(r.Rights, n.Rights...))
	}
	r.Sections = sortSections(secs...)
}

// ptyRequests are the pseudo-terminal ioctls the control replay can
// repeat on a fresh pair.
var ptyRequests = map[string]bool{
	"TIOCGPTN": true, "TIOCSPTLCK": true, "TCGETS": true, "TCSETS": true, "TCSETSW": true,
	"TCSETSF": true, "TIOCGWINSZ": true, "TIOCSWINSZ": true,
}

func isPty(p string) bool {
	if p == "/dev/ptmx" || p == "/dev/pts/ptmx" {
		return true
	}
	if n, ok := strings.CutPrefix(p, "/dev/pts/"); ok {
		_, err := strconv.Atoi(n)
		return err == nil
	}
	return false
}

func (a *Attributor) ioctl(c *strace.Call) *Refusal {
	fd, ok := argFD(c, 0)
	if !ok || fd.Path == "" {
		return other("ioctl on a descriptor without a path annotation")
	}
	req := string(argAt(c, 1))
	if isPty(fd.Path) && ptyRequests[req] {
		r := fsRefusal("ioctl", Need{Path: fd.Path, Sections: []policy.Section{policy.Ioctl}, Rights: []Right{IoctlDev}})
		r.Detail = req
		return r
	}
	r := fixed("ioctl", "a device ioctl (%s on %s) is granted only for the pseudo-terminal requests the control can repeat", req, fd.Path)
	r.Detail = req
	r.Paths = []string{fd.Path}
	return r
}

// network attributes connect, send and bind.
func (a *Attributor) network(c *strace.Call) *Refusal {
	var addrArg strace.Arg
	switch c.Name {
	case "connect", "bind", "sendmsg", "sendmmsg":
		addrArg = argAt(c, 1)
	case "sendto":
		addrArg = argAt(c, 4)
	}
	sa, ok := addrArg.SockAddr()
	if !ok {
		return other("%s without a destination address is not a Landlock refusal", c.Name)
	}
	sock, _, known := a.socket(c)
	switch sa.Family {
	case "AF_UNIX":
		return a.unixSocket(c, sa)
	case "AF_INET", "AF_INET6":
	default:
		return fixed(c.Name, "%s to family %s is refused by a fixed rule", c.Name, sa.Family)
	}
	if sa.Port < 0 {
		return other("%s to %s without a port", c.Name, sa.Family)
	}
	tr := sock.transport
	if !known || tr == "" {
		tr = policy.TCP
		if strings.HasPrefix(c.Name, "send") {
			tr = policy.UDP
		}
	}
	r := &Refusal{Layer: Network, Op: c.Name, Detail: sa.Family,
		Reason: "Landlock governs this port; grantable once the control replay succeeds"}
	r.Net = portNeeds(c.Name == "bind", sa, tr, sock.bound)
	r.Addr, r.Port, r.Transport = r.Net[0].Addr, r.Net[0].Port, r.Net[0].Transport
	for _, n := range r.Net {
		r.Rights = uniqRights(append(r.Rights, n.Right))
		r.Sections = sortSections(append(r.Sections, n.Section)...)
	}
	return r
}

// unixSocket attributes a bind or connect to a named UNIX socket: a
// filesystem refusal on the socket (or, for bind, its directory).
func (a *Attributor) unixSocket(c *strace.Call, sa strace.SockAddr) *Refusal {
	if sa.Abstract || sa.Path == "" {
		return other("an abstract or unnamed UNIX socket is scoped (EPERM), never granted")
	}
	p := sa.Path
	if !strings.HasPrefix(p, "/") {
		d := a.cwd[c.PID]
		if d == "" {
			return other("cannot resolve the relative UNIX socket path")
		}
		p = d + "/" + p
	}
	p = path.Clean(p)
	if c.Name == "bind" {
		r := fsRefusal("create", Need{Path: path.Dir(p), Sections: []policy.Section{policy.CreateIPC}, Rights: []Right{MakeSock}})
		r.Detail = "AF_UNIX"
		return r
	}
	r := fsRefusal("connect", Need{Path: p, Sections: []policy.Section{policy.Read}, Rights: []Right{ResolveUnix}})
	r.Detail = "AF_UNIX"
	return r
}

// portNeeds are what a refused bind, or connect or send, to sa over tr
// needs; bound says the socket was bound before.
func portNeeds(bind bool, sa strace.SockAddr, tr policy.Transport, bound bool) []NetNeed {
	if bind {
		right := BindTCP
		if tr == policy.UDP {
			right = BindUDP
		}
		return []NetNeed{{Section: policy.Bind, Addr: sa.Addr, Port: sa.Port, Transport: tr, Right: right}}
	}
	right := ConnectTCP
	if tr == policy.UDP {
		right = ConnectSendUDP
	}
	needs := []NetNeed{{Section: policy.Connect, Addr: sa.Addr, Port: sa.Port, Transport: tr, Right: right}}
	if tr == policy.UDP && !bound {
		// ABI 10 checks the autobind of an unbound UDP socket as a
		// bind to port 0 before the destination.
		needs = append(needs, NetNeed{Section: policy.Bind, Port: 0, Transport: policy.UDP, Right: BindUDP})
	}
	return needs
}

// Add appends needs to a filesystem refusal and recomputes Paths, Sections
// and Rights (package control adds an executable's interpreter this way).
func (r *Refusal) Add(needs ...Need) {
	r.Needs = append(r.Needs, needs...)
	r.Paths, r.Sections, r.Rights = nil, nil, nil
	r.summarise()
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

// Policy returns the literal grant a confirmed refusal proves: each need's
// sections on its path, and each network rule as written (a connect names
// its address, or every host when none was printed). A refusal of a layer
// no policy lifts grants nothing. Generalisation (a directory for its
// files, the loopback wildcards of the reference's network stage) is the
// search's business, not this.
func (r *Refusal) Policy() *policy.Policy {
	p := policy.Union()
	if !r.Layer.Grantable() {
		return p
	}
	for _, n := range r.Needs {
		if p.FS[n.Path] == nil {
			p.FS[n.Path] = map[policy.Section]bool{}
		}
		for _, s := range n.Sections {
			p.FS[n.Path][s] = true
		}
	}
	for _, n := range r.Net {
		switch n.Section {
		case policy.Bind:
			b := policy.BindRule{Port: n.Port, Transport: n.Transport}
			if !slices.Contains(p.Bind, b) {
				p.Bind = append(p.Bind, b)
			}
		case policy.Connect:
			host := "*"
			if n.Addr.IsValid() {
				host = n.Addr.Unmap().String()
			}
			c := policy.ConnectRule{Host: host, Port: n.Port, Transport: n.Transport}
			if !slices.Contains(p.Connect, c) {
				p.Connect = append(p.Connect, c)
			}
		}
	}
	return p
}
