package enforcer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/lockstep-sandbox/lockstep/internal/mountinfo"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"golang.org/x/sys/unix"
)

// Layer is one isolation layer Run puts between the command and the host,
// beside Landlock: Landlock does not restrict a file's metadata (chmod,
// chown, xattrs, times), nor system calls that name another process by its
// pid (prlimit, setpriority, sched_setscheduler), nor System V IPC.
type Layer struct {
	// Name is how --without and the status line (without=, unisolated=)
	// name it.
	Name string
	// What says what the command gets, and so what it is kept from.
	What string
	// Clone are the namespaces the enforcer child is cloned with for it.
	Clone uintptr
}

// The layers' names.
const (
	LayerMounts = "mounts"
	LayerPID    = "pid"
	LayerIPC    = "ipc"
	LayerUTS    = "uts"
	LayerMemfd  = "memfd"
)

// Layers is the table of isolation layers, in the order they are named.
// memfd lives in the PID namespace: switching pid off switches it off too.
var Layers = []Layer{
	{LayerMounts, "a mount namespace in which every mount is read-only except the paths the policy lets the command change ([write], [create], [create-ipc], [create-symlink], [delete], [restructure]): chmod, chown, setxattr, utime and creating files elsewhere fail with EROFS, for root too", unix.CLONE_NEWNS},
	{LayerPID, "a PID namespace with a /proc of its own, under a small init: the command sees and can name only its own processes (no prlimit, setpriority or kill of lockstep or anything else), and nothing it starts outlives it", unix.CLONE_NEWPID | unix.CLONE_NEWNS},
	{LayerIPC, "an IPC namespace: System V shared memory, semaphores and message queues and POSIX message queues of its own, none of the host's", unix.CLONE_NEWIPC},
	{LayerUTS, "a UTS namespace: a host name of its own (sethostname changes only its copy)", unix.CLONE_NEWUTS},
	{LayerMemfd, "vm.memfd_noexec=2 in its PID namespace: a memfd cannot be made executable, so bytes written to one cannot be run past [execute] (kernel 6.3+)", 0},
}

// MeasureWithout are the layers the observer, the pruner and the
// containment probes switch off (Prefix, MeasureArgs): they measure
// Landlock's own refusals and its audit records. On a read-only mount the
// kernel refuses a write with EROFS before Landlock is asked, so neither
// would be seen. In a PID namespace the audit records name /proc/self's
// files with the namespace's pids (/proc/8/mounts), which strace, outside,
// resolves with the host's: the observer's cross-check counted them as
// records without a refusal (TestProcMountsHostKernel,
// TestCrossCheckSymlinksHostKernel). memfd goes with pid.
var MeasureWithout = []string{LayerMounts, LayerPID}

// LayerNames lists the names of Layers.
func LayerNames() []string {
	names := make([]string, len(Layers))
	for i, l := range Layers {
		names[i] = l.Name
	}
	return names
}

// ParseLayers reads a --without value: layer names separated by commas.
func ParseLayers(s string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(LayerNames(), n) {
			return nil, fmt.Errorf("unknown isolation layer %q (the layers: %s)", n, strings.Join(LayerNames(), ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// switchedOff returns the layers off, in table order: those named in
// without, and memfd with pid (it is a setting of the PID namespace).
func switchedOff(without []string) ([]string, error) {
	for _, n := range without {
		if !slices.Contains(LayerNames(), n) {
			return nil, errorf(ErrRefused, "unknown isolation layer %q (the layers: %s). Nothing ran.", n, strings.Join(LayerNames(), ", "))
		}
	}
	var off []string
	for _, l := range Layers {
		if slices.Contains(without, l.Name) || (l.Name == LayerMemfd && slices.Contains(without, LayerPID)) {
			off = append(off, l.Name)
		}
	}
	return off, nil
}

// missingLayer is a layer that was asked for and cannot be had here, and why.
type missingLayer struct {
	Layer string `json:"layer"`
	Why   string `json:"why"`
}

func layerList(m []missingLayer) string {
	var names []string
	for _, l := range m {
		if !slices.Contains(names, l.Layer) {
			names = append(names, l.Layer)
		}
	}
	return strings.Join(names, ",")
}

// missingWhy says why each layer is missing, the layers with one reason
// together.
func missingWhy(m []missingLayer) string {
	var whys []string
	layers := map[string][]string{}
	for _, l := range m {
		if _, seen := layers[l.Why]; !seen {
			whys = append(whys, l.Why)
		}
		layers[l.Why] = append(layers[l.Why], l.Layer)
	}
	parts := make([]string, len(whys))
	for i, w := range whys {
		parts[i] = strings.Join(layers[w], ", ") + ": " + w
	}
	return strings.Join(parts, "; ")
}

// isolateSpec is what the enforcer child sets up in its namespaces before
// it restricts itself.
type isolateSpec struct {
	// Proc: mount a /proc of the PID namespace's own.
	Proc bool `json:"proc,omitempty"`
	// Memfd: write 2 to vm.memfd_noexec (per PID namespace).
	Memfd bool `json:"memfd,omitempty"`
	// Mounts: make every mount read-only except Writable.
	Mounts   bool     `json:"mounts,omitempty"`
	Writable []string `json:"writable,omitempty"`
	// ClearAmbient: the child got CAP_SYS_ADMIN as an ambient capability
	// in a user namespace of its own, for the mounts; the command must
	// not keep it.
	ClearAmbient bool `json:"clear_ambient,omitempty"`
	// Missing are layers the parent found it cannot give (the clone with
	// the namespaces failed).
	Missing []missingLayer `json:"missing,omitempty"`
	// Require refuses the run when a layer is missing.
	Require bool `json:"require,omitempty"`
}

// changeRights are the Landlock rights that change the file system: a
// path granted any of them stays writable under the mounts layer.
const changeRights = landlock.FSWriteFile | landlock.FSTruncate | landlock.FSMakeReg | landlock.FSMakeDir |
	landlock.FSMakeSock | landlock.FSMakeFifo | landlock.FSMakeSym | landlock.FSRemoveFile |
	landlock.FSRemoveDir | landlock.FSRefer | landlock.FSMakeChar | landlock.FSMakeBlock

// writablePaths lists the ruleset's paths granted a right that changes
// the file system, as the child opens them: with the links resolved when
// the policy was checked (PathRule.Open), so that each is the mount point
// its bind shows in mountinfo.
func writablePaths(rs *Ruleset) []string {
	var out []string
	for _, p := range rs.Paths {
		if p.Access&changeRights == 0 {
			continue
		}
		if p.Open != "" {
			out = append(out, p.Open)
			continue
		}
		out = append(out, p.Path)
	}
	return out
}

// isolation is how the parent starts the enforcer child for the layers
// asked for: the namespaces it is cloned with, whether an init is PID 1,
// and what the child sets up.
type isolation struct {
	clone  uintptr
	init   bool
	shell  bool // the init is initScript (else InitMain)
	userns bool
	spec   isolateSpec
	on     []string // the layers asked for, in table order
}

// planIsolation works out the layers of a run that switches off.
func planIsolation(off []string, rs *Ruleset, require bool) *isolation {
	iso := &isolation{spec: isolateSpec{Require: require}}
	for _, l := range Layers {
		if slices.Contains(off, l.Name) {
			continue
		}
		iso.on = append(iso.on, l.Name)
		iso.clone |= l.Clone
		switch l.Name {
		case LayerPID:
			iso.init, iso.spec.Proc = true, true
			iso.shell = unix.Access(initShell, unix.X_OK) == nil
		case LayerMemfd:
			iso.spec.Memfd = true
		case LayerMounts:
			iso.spec.Mounts, iso.spec.Writable = true, writablePaths(rs)
		}
	}
	if iso.clone != 0 && !hasCapSysAdmin() {
		// Not root (or root without CAP_SYS_ADMIN, as in a container): a
		// user namespace gives the child the capabilities for the
		// namespaces and mounts, mapping the caller's uid and gid to
		// themselves so that the command keeps them.
		iso.userns, iso.spec.ClearAmbient = true, true
	}
	return iso
}

// hasCapSysAdmin reports whether this process may create namespaces
// itself: CAP_SYS_ADMIN in its effective set.
func hasCapSysAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return unix.Geteuid() == 0
	}
	return data[unix.CAP_SYS_ADMIN/32].Effective&(1<<(unix.CAP_SYS_ADMIN%32)) != 0
}

// attr puts the namespaces on the child's clone.
func (iso *isolation) attr(a *syscall.SysProcAttr) {
	a.Cloneflags |= iso.clone
	if !iso.userns {
		return
	}
	uid, gid := os.Geteuid(), os.Getegid()
	a.Cloneflags |= unix.CLONE_NEWUSER
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
}

// without gives up every layer: the clone with the namespaces failed
// (not root and no user namespaces, or a kernel without them).
func (iso *isolation) without(cloneErr error) {
	// The errno alone: the error around it names the executable.
	var cause any = cloneErr
	var errno syscall.Errno
	if errors.As(cloneErr, &errno) {
		cause = errno
	}
	why := fmt.Sprintf("the namespaces cannot be created here (clone: %v)", cause)
	if iso.userns {
		why = fmt.Sprintf("no CAP_SYS_ADMIN (not root), and no user namespace can be created here (clone: %v)", cause)
	}
	for _, n := range iso.on {
		iso.spec.Missing = append(iso.spec.Missing, missingLayer{n, why})
	}
	iso.clone, iso.init, iso.shell, iso.userns = 0, false, false, false
	iso.spec.Proc, iso.spec.Memfd, iso.spec.Mounts, iso.spec.ClearAmbient = false, false, false, false
}

// apply sets the layers up in the child's namespaces and returns those
// that could not be had (with the parent's).
func (is *isolateSpec) apply() []missingLayer {
	missing := slices.Clone(is.Missing)
	add := func(layer string, err error) { missing = append(missing, missingLayer{layer, err.Error()}) }
	if is.Proc || is.Mounts {
		// Nothing mounted below reaches the host's mount namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			err = fmt.Errorf("make the mounts private: %w", err)
			if is.Proc {
				add(LayerPID, err)
			}
			if is.Mounts {
				add(LayerMounts, err)
			}
			is.Proc, is.Mounts = false, false
		}
	}
	if is.Proc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			add(LayerPID, fmt.Errorf("mount a /proc of its own: %w", err))
		}
	}
	if is.Memfd {
		if err := os.WriteFile("/proc/sys/vm/memfd_noexec", []byte("2"), 0); err != nil {
			add(LayerMemfd, fmt.Errorf("set vm.memfd_noexec=2 (kernel 6.3+; root in the initial user namespace): %w", err))
		}
	}
	if is.Mounts {
		if err := readOnlyExcept(is.Writable); err != nil {
			add(LayerMounts, err)
		}
	}
	if is.ClearAmbient {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			add(LayerMounts, fmt.Errorf("clear the ambient capabilities: %w", err))
		}
	}
	return missing
}

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

// initShell runs initScript as the PID namespace's init; a variable so the
// tests can take it away (InitMain is the init then).
var initShell = "/bin/sh"

// initScript is PID 1 of the command's PID namespace. It starts the
// enforcer child ($0, with RoleEnv=ChildRole in the environment) as an
// asynchronous command, with stdin passed on explicitly (an asynchronous
// command's stdin is /dev/null otherwise; its ignored SIGINT and SIGQUIT
// the child resets: childSpec.DefaultSignals), closes its own copies of
// the instruction and report pipes (the parent reads the report pipe to
// its end), and waits. The shell's wait reaps every child, so orphans
// too; it exits with the child's status (128+n after a signal n: an init
// cannot die by its own signal), and then the kernel kills what is left
// in the namespace. It stays in the child's process group, so lockstep's
// and the terminal's signals to the group reach the command directly
// (an init ignores every signal it has no trap for); when the child has a
// session of its own ($1 = setsid), lockstep's SIGTERM to the init's pid
// is passed on to it.
const initScript = `c=
if [ "$1" = setsid ]; then
  trap 'f=1; [ -n "$c" ] && { kill -TERM -"$c" 2>/dev/null || kill -TERM "$c"; }' TERM
fi
exec 5<&0
"$0" 0<&5 5<&- &
c=$!
exec 3<&- 4>&- 5<&-
while :; do
  f=
  wait "$c"
  s=$?
  [ -z "$f" ] && exit "$s"
done`

// InitRole is the RoleEnv value of the PID namespace's init (InitMain).
const InitRole = "enforcer-init"

// How the init places the enforcer child (its first argument).
const (
	initForeground = "fg"     // stdin is the controlling terminal: the child's group gets it
	initGroup      = "pgrp"   // a process group of its own
	initSession    = "setsid" // the init starts a session first: no controlling terminal
)

// cgroupJoinEnv tells the enforcer child to join a cgroup it could not be
// cloned into.
const cgroupJoinEnv = "LOCKSTEP_JOIN_CGROUP"

// forwardedSignals are the signals the init passes on to the command's
// process group: lockstep's SIGTERM at a timeout, and what anyone sends
// to the pid lockstep knows. An init without handlers would ignore them
// (the kernel lets a PID namespace's init get only the signals it
// handles, and SIGKILL from outside).
var forwardedSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM}

// InitMain is PID 1 of the command's PID namespace: it starts the enforcer
// child (this executable with RoleEnv=ChildRole, passing on the
// instruction and report pipes at fds 3 and 4), in its cgroup when one is
// named, forwards forwardedSignals to the child's process group, reaps
// every orphan and exits with the command's status (128+n when a signal n
// ended it: an init cannot be ended by its own signal). When it exits the
// kernel kills whatever is left in the namespace: nothing the command
// started outlives it. Its arguments: the placement (initForeground,
// initGroup, initSession) and the cgroup directory ("" for none).
func InitMain() int {
	if err := startedByRun(); err != nil {
		fmt.Fprintf(os.Stderr, "lockstep: %v\n", err)
		return StatusNotStartedByRun
	}
	if len(os.Args) != 3 {
		return initFail("the init takes a placement and a cgroup, got %q", os.Args[1:])
	}
	place, cgdir := os.Args[1], os.Args[2]
	if place == initSession {
		if _, err := unix.Setsid(); err != nil {
			return initFail("setsid: %v", err)
		}
	}
	sigs := make(chan os.Signal, len(forwardedSignals))
	signal.Notify(sigs, forwardedSignals...)
	pid, err := startEnforcerChild(os.Args[0], place == initForeground, cgdir)
	if err != nil {
		return initFail("start the enforcer child: %v", err)
	}
	unix.Close(3)
	unix.Close(4)
	go func() {
		for s := range sigs {
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			fmt.Fprintf(os.Stderr, "lockstep init: wait: %v\n", err)
			return StatusRefused
		case wpid != pid:
			continue // an orphan
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// startEnforcerChild starts self as the enforcer child in a process group
// of its own (given the terminal when fg), cloned into cgdir's cgroup, or,
// where that clone is refused, told to join it.
func startEnforcerChild(self string, fg bool, cgdir string) (int, error) {
	env := append(withoutRole(os.Environ()), RoleEnv+"="+ChildRole)
	attr := &syscall.SysProcAttr{Setpgid: true, Foreground: fg}
	if cgdir != "" {
		fd, err := unix.Open(cgdir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("open cgroup %s: %w", cgdir, err)
		}
		defer unix.Close(fd)
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
	pa := &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2, 3, 4}, Sys: attr}
	pid, err := syscall.ForkExec(self, []string{self}, pa)
	if err != nil && attr.UseCgroupFD {
		attr.UseCgroupFD, attr.CgroupFD = false, 0
		pa.Env = append(env, cgroupJoinEnv+"="+cgdir)
		pid, err = syscall.ForkExec(self, []string{self}, pa)
	}
	return pid, err
}

// initFail reports a failure of the init on the report pipe, as the
// enforcer child does, and returns 125.
func initFail(format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	b, _ := json.Marshal(childReport{Status: StatusRefused, Msg: msg})
	if _, err := unix.Write(4, append(b, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "lockstep init: %s\n", msg)
	}
	return StatusRefused
}

// initPlacement says how the init places the enforcer child, from how
// commandStreams placed the init, and clears the init's Setsid (it starts
// its session itself, once its Go runtime is up).
func initPlacement(a *syscall.SysProcAttr) string {
	switch {
	case a.Setsid:
		a.Setsid = false
		return initSession
	case a.Foreground:
		return initForeground
	}
	return initGroup
}

// cleanDir is the directory the command starts in, absolute: a directory
// entered before the binds of the mounts layer would still be the
// read-only mount beneath them, so the child changes into it by name
// after them.
func cleanDir(dir string) string {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return ""
		}
		return wd
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// defaultSignals sets SIGINT and SIGQUIT to their default actions, with
// raw rt_sigaction calls (nothing of the Go runtime's handling is wanted
// any more: the exec follows). A zero struct sigaction is SIG_DFL.
func defaultSignals() {
	var act [4]uint64
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT} {
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
}
