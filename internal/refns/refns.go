package refns

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Verb is the role's first argument: `<program> ref-run --read-only P…
// --writable W… -- <command>…`.
const Verb = "ref-run"

// SetupStatus is the role's exit status when it could not isolate the run;
// the command has not run. Its message names what failed.
const SetupStatus = 125

// Hint is what the isolation needs, said where starting it fails.
const Hint = "the reference run starts in user, mount and PID namespaces of its own (a kernel with CONFIG_USER_NS and CONFIG_PID_NS, user.max_user_namespaces above 0, and the right to map every id: root)"

// programFD is the descriptor the program is passed as and executed
// through (os/exec's first extra file).
const programFD = 3

// Namespaces are the run's namespaces besides the user namespace.
const Namespaces = unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// kernelPaths are the kernel's writable surfaces a root whose ids are
// the real ones could write through: they are read-only in every run.
var kernelPaths = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/sys"}

// systemPaths hold the programs, libraries and loader configuration
// (/etc/ld.so.preload) of what the starter runs outside any sandbox after
// the run (strace, as root): they are read-only in every run. (On a merged
// /usr the top-level links lead into /usr.)
var systemPaths = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// devNodes are the character devices of the run's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the links of the run's /dev.
var devLinks = map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
	"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}

// Open opens path as a program to execute later (O_PATH): what is executed
// is the file open now, whatever is renamed over path meanwhile.
func Open(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the program %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenSelf opens this process's own executable (Open of /proc/self/exe).
func OpenSelf() (*os.File, error) { return Open("/proc/self/exe") }

// Path is a path that executes f from a process of this one's user and PID
// namespaces (/proc/<pid>/fd/<n>): the argv[0] of a command that must run
// the open program, not whatever lies at its old path.
func Path(f *os.File) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
}

// Wrap changes cmd (whose Path and Args are the command, with no extra
// files) into the role that runs it isolated: program (this program, Open
// before any run) executed through a descriptor of its own as Verb, cloned
// into a user namespace mapping every id to itself and the Namespaces, in a
// process group of its own. readOnly are paths the run sees read-only;
// writable are paths below them it may write all the same.
func Wrap(cmd *exec.Cmd, program *os.File, readOnly, writable []string) error {
	if program == nil {
		return errors.New("isolated run: no program to serve the role " + Verb)
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("isolated run: the command has extra files; the program is passed as the first")
	}
	args := []string{"lockstep", Verb}
	for _, l := range []struct {
		flag  string
		paths []string
	}{{"--read-only", readOnly}, {"--writable", writable}} {
		for _, p := range l.paths {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("isolated run: the path %q (%s) is not absolute", p, l.flag)
			}
			args = append(args, l.flag, p)
		}
	}
	args = append(append(args, "--", cmd.Path), cmd.Args[1:]...)
	cmd.Path, cmd.Args = "/proc/self/fd/"+strconv.Itoa(programFD), args
	cmd.ExtraFiles = []*os.File{program}
	cmd.SysProcAttr = userNS(Namespaces)
	cmd.SysProcAttr.Setpgid = true
	return nil
}

// userNS clones a process into a new user namespace that maps every id to
// itself, and the namespaces in flags.
func userNS(flags uintptr) *syscall.SysProcAttr {
	every := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: math.MaxUint32}}
	return &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER | flags, UidMappings: every, GidMappings: every,
		GidMappingsEnableSetgroups: true}
}

// nested is the command's clone: a user namespace in the role's and a
// mount namespace of its own.
func nested() *syscall.SysProcAttr { return userNS(unix.CLONE_NEWNS) }

// Main is the role: it parses its arguments and calls Serve.
func Main(args []string, stderr io.Writer) int {
	clone := len(args) > 0 && args[0] == CloneFlag
	if clone {
		args = args[1:]
	}
	var readOnly, writable []string
	for ; len(args) >= 2 && (args[0] == "--read-only" || args[0] == "--writable"); args = args[2:] {
		if args[0] == "--read-only" {
			readOnly = append(readOnly, args[1])
		} else {
			writable = append(writable, args[1])
		}
	}
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintf(stderr, "usage: %s [%s] [--read-only <path>]… [--writable <path>]… -- <command>…\n", Verb, CloneFlag)
		return 2
	}
	if clone {
		return Clone(readOnly, writable, args[1:], stderr)
	}
	return Serve(readOnly, writable, args[1:], stderr)
}

// CloneFlag, first after Verb, asks the role to clone itself into the
// run's namespaces (Clone) rather than be there already: for a starter
// that execs it in place, as cold-run does.
const CloneFlag = "--clone"

// CloneCommand is the argv prefix that isolates the command after it from
// a process that executes it in place: program (a path: it is executed
// before the run starts), Verb, CloneFlag and the paths. The command
// follows.
func CloneCommand(program string, readOnly, writable []string) []string {
	argv := []string{program, Verb, CloneFlag}
	for _, p := range readOnly {
		argv = append(argv, "--read-only", p)
	}
	for _, p := range writable {
		argv = append(argv, "--writable", p)
	}
	return append(argv, "--")
}

// Clone runs argv isolated as Wrap does, from this process (this program
// again, opened now, cloned into the namespaces as Serve), in this
// process's group, and returns its status, or SetupStatus.
func Clone(readOnly, writable, argv []string, stderr io.Writer) int {
	status, err := clone(readOnly, writable, argv)
	if err != nil {
		fmt.Fprintf(stderr, "lockstep %s: %v; %s\n", Verb, err, Hint)
		return SetupStatus
	}
	return status
}

func clone(readOnly, writable, argv []string) (int, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, err
	}
	self, err := OpenSelf()
	if err != nil {
		return 0, err
	}
	defer self.Close()
	cmd := &exec.Cmd{Path: path, Args: argv, Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := Wrap(cmd, self, readOnly, writable); err != nil {
		return 0, err
	}
	// The run's process group is its starter's: a signal to it reaches
	// the command.
	cmd.SysProcAttr.Setpgid = false
	return wait(cmd)
}

// Serve is the role in the run's new namespaces, as their PID 1: it
// isolates the run (a fresh /proc, the kernel's tunables, the system's
// paths and readOnly read-only but for writable, a /dev of its own), runs
// argv as its child in a user and
// mount namespace nested in its own, where all of that is locked, and
// returns its status (death by signal N is 128+N), or SetupStatus.
func Serve(readOnly, writable, argv []string, stderr io.Writer) int {
	if err := isolate(readOnly, writable); err != nil {
		fmt.Fprintf(stderr, "lockstep %s: %v; %s\n", Verb, err, Hint)
		return SetupStatus
	}
	status, err := run(argv)
	if err != nil {
		fmt.Fprintf(stderr, "lockstep %s: %v\n", Verb, err)
		return SetupStatus
	}
	return status
}

// isolate prepares the namespaces the command runs in.
func isolate(readOnly, writable []string) error {
	// The program's own descriptor (and anything else inherited) must not
	// reach the command: reopened through /proc, it would be writable.
	if err := unix.CloseRange(programFD, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("closing inherited descriptors on exec: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("a /proc of the run's PID namespace: %w", err)
	}
	if err := newDev(); err != nil {
		return fmt.Errorf("the run's /dev: %w", err)
	}
	for _, p := range append(append(append([]string(nil), kernelPaths...), systemPaths...), readOnly...) {
		if err := makeReadOnly(p); err != nil {
			return fmt.Errorf("making %s read-only: %w", p, err)
		}
	}
	for _, p := range writable {
		if err := bindSelf(p, unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("keeping %s writable: %w", p, err)
		}
	}
	return nil
}

// makeReadOnly binds p (and what is mounted below it) over itself and makes
// the binds read-only.
func makeReadOnly(p string) error {
	return bindSelf(p, unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// bindSelf binds p (and what is mounted below it) over itself and changes
// the binds' attributes by attr; a missing p is left alone.
func bindSelf(p string, attr unix.MountAttr) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &attr)
}

// newDev puts a tmpfs over /dev holding binds of devNodes, devLinks, a
// devpts of the run's own and a /dev/shm: no disk, no device of the guest's
// or host's beyond those.
func newDev() error {
	trees := map[string]int{}
	defer func() {
		for _, fd := range trees {
			unix.Close(fd)
		}
	}()
	for _, n := range devNodes {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+n, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("/dev/%s: %w", n, err)
		}
		trees[n] = fd
	}
	if err := unix.Mount("lockstep-ref-dev", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return err
	}
	for n, fd := range trees {
		if err := os.WriteFile("/dev/"+n, nil, 0o666); err != nil {
			return err
		}
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, "/dev/"+n, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("/dev/%s: %w", n, err)
		}
	}
	for n, target := range devLinks {
		if err := os.Symlink(target, "/dev/"+n); err != nil {
			return err
		}
	}
	return subFS()
}

// subFS mounts /dev/pts (a new instance) and /dev/shm.
func subFS() error {
	for _, m := range []struct{ dir, fstype, data string }{
		{"/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=0620"},
		{"/dev/shm", "tmpfs", "mode=1777"},
	} {
		if err := os.Mkdir(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("lockstep-ref-"+m.fstype, m.dir, m.fstype, unix.MS_NOSUID|unix.MS_NOEXEC, m.data); err != nil {
			return fmt.Errorf("%s (%s): %w", m.dir, m.fstype, err)
		}
	}
	return nil
}

// run runs argv as this process's child, with its environment and
// standard descriptors, and returns its status. The child is cloned into a
// user namespace nested in this one (every id mapped to itself again) and
// a mount namespace of that one's: the mounts isolate made are locked
// there, so the run, root in its namespace with every capability (it may
// mount, as the command under lane-run does), can neither unmount them nor
// clear their read-only flag, nor mount a /proc that shows what they hide.
func run(argv []string) (int, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, err
	}
	return wait(&exec.Cmd{Path: path, Args: argv, Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: nested()})
}

// wait starts cmd, waits for it and returns its status (death by signal N
// is 128+N). The signals a run's process group gets are the command's: the
// role lets them by (PID 1 gets only those it handles) and waits.
func wait(cmd *exec.Cmd) (int, error) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)
	go func() {
		for range sigs {
		}
	}()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	_ = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}
