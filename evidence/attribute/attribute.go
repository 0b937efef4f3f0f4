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
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
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
// the missing ones, a subset of them. Package landlock names them and says
// which section grants each.
type Right = landlock.Right

// Need is what one object needs: sections of a policy, and the rights they
// stand for, on one path.
type Need struct {
	Path     string
	Sections []policy.Section
	Rights   []Right
}

// NewNeed is what path needs for rights: the rights, and the sections that
// grant them (landlock.Right.Section) in the order of the rights.
func NewNeed(path string, rights ...Right) Need {
	n := Need{Path: path, Rights: rights}
	for _, r := range rights {
		if s := policy.Section(r.Section()); !slices.Contains(n.Sections, s) {
			n.Sections = append(n.Sections, s)
		}
	}
	return n
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

// sortedNeed is NewNeed with the sections in the policy's canonical order.
func sortedNeed(p string, rights ...Right) Need {
	n := NewNeed(p, rights...)
	n.Sections = sortSections(n.Sections...)
	return n
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

// ioctlRequest is the request of an ioctl on p by the one name it has
// there. strace prints every name its tables give the request's number,
// joined by " or " (0x5403 is "SNDCTL_TMR_STOP or TCSETSW": the OSS
// sequencer's timer stop and the terminal's set-after-drain, which less
// sends to /dev/tty); the descriptor's type decides which is meant: on a
// pseudo-terminal, the terminal's request.
func ioctlRequest(req, p string) string {
	if !isPty(p) || !strings.Contains(req, " or ") {
		return req
	}
	for _, alt := range strings.Split(req, " or ") {
		if ptyRequests[alt] {
			return alt
		}
	}
	return req
}

// ioctl attributes an ioctl on the device at p: lockstep grants ioctl_dev
// only for the pseudo-terminal requests the control replay can repeat.
func (a *Attributor) ioctl(c *strace.Call, p string) *Refusal {
	req := ioctlRequest(string(argAt(c, 1)), p)
	if isPty(p) && ptyRequests[req] {
		r := fsRefusal("ioctl", NewNeed(p, landlock.IoctlDev))
		r.Detail = req
		return r
	}
	r := fixed("ioctl", "a device ioctl (%s on %s) is granted only for the pseudo-terminal requests the control can repeat", req, p)
	r.Detail = req
	r.Paths = []string{p}
	return r
}

// network attributes connect, send and bind: the call's network right on
// an INET socket, its filesystem right on a pathname UNIX socket.
func (a *Attributor) network(c *strace.Call, call landlock.Syscall) *Refusal {
	sa, ok := argAt(c, call.Addr).SockAddr()
	if !ok {
		return other("%s without a destination address is not a Landlock refusal", c.Name)
	}
	switch sa.Family {
	case "AF_UNIX":
		return a.unixSocket(c, call, sa)
	case "AF_INET", "AF_INET6":
	default:
		return fixed(c.Name, "%s to family %s is refused by a fixed rule", c.Name, sa.Family)
	}
	if sa.Port < 0 {
		return other("%s to %s without a port", c.Name, sa.Family)
	}
	sock, _, known := a.socket(c)
	tr := sock.transport
	if !known || tr == "" {
		tr = policy.TCP
		if strings.HasPrefix(c.Name, "send") {
			tr = policy.UDP
		}
	}
	right := call.TCP
	if tr == policy.UDP {
		right = call.UDP
	}
	r := &Refusal{Layer: Network, Op: c.Name, Detail: sa.Family,
		Reason: "Landlock governs this port; grantable once the control replay succeeds"}
	r.Net = []NetNeed{{Section: policy.Section(right.Section()), Addr: sa.Addr, Port: sa.Port, Transport: tr, Right: right}}
	if right == landlock.ConnectSendUDP && !sock.bound {
		// ABI 10 checks the autobind of an unbound UDP socket as a
		// bind to port 0 before the destination.
		r.Net = append(r.Net, NetNeed{Section: policy.Section(landlock.BindUDP.Section()), Port: 0, Transport: policy.UDP, Right: landlock.BindUDP})
	}
	r.Addr, r.Port, r.Transport = r.Net[0].Addr, r.Net[0].Port, r.Net[0].Transport
	for _, n := range r.Net {
		r.Rights = uniqRights(append(r.Rights, n.Right))
		r.Sections = sortSections(append(r.Sections, n.Section)...)
	}
	return r
}

// unixSocket attributes a bind to, or a connect or send to, a UNIX socket:
// the call's filesystem right on the socket file (or its parent, to bind).
func (a *Attributor) unixSocket(c *strace.Call, call landlock.Syscall, sa strace.SockAddr) *Refusal {
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
	op := "connect"
	if call.Object == landlock.Parent {
		p, op = path.Dir(p), "create"
	}
	r := fsRefusal(op, NewNeed(p, call.Rights...))
	r.Detail = "AF_UNIX"
	return r
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

// Uses attributes every call of a trace that succeeded as though it had
// been refused: what a policy must grant for the call to succeed under
// Landlock. It is the recording pruner's view of an unsandboxed run, with
// the pruner's own mapping from calls to rights. Calls no Landlock right
// governs give nothing; socket creation and the process-group calls, which
// fixed rules refuse whatever a policy says, give nothing either (they
// succeed under lockstep run as they did unsandboxed, or not at all).
// Options.Lstat should answer from the state before the run, so an
// O_CREAT open of a file the run created counts as a create.
func Uses(calls []*strace.Call, opts Options) []*Refusal {
	a := New(opts)
	var out []*Refusal
	for _, c := range calls {
		a.track(c)
		if c.Kind != strace.Syscall || c.Failed() && !connectStarted(c) || c.Unfinished {
			continue
		}
		if r := a.use(c); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// connectStarted reports a non-blocking connect that Landlock let through:
// EINPROGRESS (the handshake goes on after the call), where a refusal is
// EACCES.
func connectStarted(c *strace.Call) bool {
	return c.Name == "connect" && c.Errno == "EINPROGRESS"
}

// devIoctl reports whether an ioctl is one Landlock's ioctl_dev right
// governs: on a device file, and not one of the requests every file
// answers (FIOCLEX, FIONCLEX, FIONBIO, FIOASYNC, FIOQSIZE), which Landlock
// always allows.
func devIoctl(c *strace.Call) bool {
	switch string(argAt(c, 1)) {
	case "FIOCLEX", "FIONCLEX", "FIONBIO", "FIOASYNC", "FIOQSIZE":
		return false
	}
	fd, ok := argFD(c, 0)
	return ok && strings.HasPrefix(fd.Path, "/dev/")
}

// use is Observe's attribution of one successful call.
func (a *Attributor) use(c *strace.Call) *Refusal {
	switch c.Name {
	case "setsid", "setpgid", "socket", "socketpair":
		return nil
	}
	if _, ok := landlock.Syscalls[c.Name]; !ok || c.Name == "ioctl" && !devIoctl(c) {
		return nil
	}
	r := a.refusal(c)
	r.Call = c
	if r.Op == "" {
		r.Op = c.Name
	}
	if r.Layer == Other && r.Reason == reasonOPath {
		return nil
	}
	return a.complete(r)
}

// complete is the last step of every attribution: no port (-1) when no
// network right is in it, and for a file system refusal its paths resolved
// (Options.Resolve) and summarised.
func (a *Attributor) complete(r *Refusal) *Refusal {
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
