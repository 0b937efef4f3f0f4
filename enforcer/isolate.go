package enforcer

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

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
