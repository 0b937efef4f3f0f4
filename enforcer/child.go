package enforcer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"golang.org/x/sys/unix"
)

// init makes every binary that links this package a valid re-executed child
// and cgroup reaper: with RoleEnv=ChildRole (ReaperRole) it becomes the
// child (the reaper) before main (or a test binary's TestMain) runs, so a
// program or test calling Run can never start itself again by mistake.
func init() {
	switch os.Getenv(RoleEnv) {
	case ChildRole:
		os.Exit(ChildMain())
	case InitRole:
		os.Exit(InitMain())
	case ReaperRole:
		os.Exit(ReaperMain())
	}
}

// ChildMain is the restricted child's entry point. The package's init calls
// it when the environment has RoleEnv=ChildRole; cmd/lockstep also lists it
// as a hidden role. It reads its instructions from fd 3, joins the
// cgroups it was not cloned into, writes the caps (pids.max), changes
// directory, builds the Landlock ruleset, restricts itself, installs the
// seccomp filter of SyscallRules, writes the
// status line, sets the rlimits and executes the command. Any
// failure before the exec is written to fd 4 (closed on exec) and returned
// as the exit status: 125 refused, 126 cannot execute, 127 not found. A
// process not started by Run (no pipes at fds 3 and 4) says so on stderr and
// exits StatusNotStartedByRun.
func ChildMain() int {
	if err := startedByRun(); err != nil {
		fmt.Fprintf(os.Stderr, "lockstep: %v\n", err)
		return StatusNotStartedByRun
	}
	runtime.LockOSThread() // never unlocked: the restricted thread execs
	rep := os.NewFile(4, "lockstep-report")
	syscall.CloseOnExec(4)
	fail := func(status int, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if rep != nil {
			_ = json.NewEncoder(rep).Encode(childReport{Status: status, Msg: msg})
		}
		if rep == nil {
			fmt.Fprintf(os.Stderr, "lockstep run: %s\n", msg)
		}
		return status
	}
	specFile := os.NewFile(3, "lockstep-spec")
	if specFile == nil {
		return fail(StatusRefused, "enforcer child started without its instructions on fd 3")
	}
	var spec childSpec
	err := json.NewDecoder(specFile).Decode(&spec)
	specFile.Close()
	if err != nil {
		return fail(StatusRefused, "read instructions: %v", err)
	}
	if len(spec.Command) == 0 || spec.Ruleset == nil {
		return fail(StatusRefused, "instructions lack a command or a ruleset")
	}
	if err := spec.setUp(); err != nil {
		return fail(StatusRefused, "%v", err)
	}
	path, status, err := lookPath(spec.Command[0], spec.Env)
	if err != nil {
		return fail(status, "%v", err)
	}
	if err := restrictSelf(spec.Ruleset); err != nil {
		return fail(StatusRefused, "%v", err)
	}
	if err := installSeccompFilter(); err != nil {
		return fail(StatusRefused, "%v", err)
	}
	if spec.Status != "" {
		fmt.Fprintln(os.Stderr, spec.Status)
	}
	// The command gets stdin, stdout and stderr and no other descriptor
	// of its caller: one opened before the sandbox is not restricted by
	// it (a file open for writing stays writable), and a stray one the
	// caller inherited (a CI runner's, a shell's) would move the highest
	// descriptor the pruner measures for [limits] nofile from one machine
	// to the next. fd 3 (the spec) is closed; fd 4 is close-on-exec.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	ex, err := prepareExec(path, spec.Command, spec.Env, spec.Rlimits)
	if err == nil {
		err = ex.encodeReports()
	}
	if err != nil {
		return fail(StatusCannotExec, "%s: %v", path, err)
	}
	if spec.DefaultSignals {
		defaultSignals()
	}
	status, report := ex.limitAndExec(rawExecve)
	if report != nil && rep != nil {
		_, _ = unix.Write(4, report) // raw: no allocation after the limits
		return status
	}
	return fail(status, "%s", ex.message())
}

// setUp does what the child does before it looks the command up: its
// session, its cgroups and their caps, the isolation layers, its working
// directory. An error is a refusal.
func (spec *childSpec) setUp() error {
	if spec.Setsid {
		if _, err := unix.Setsid(); err != nil {
			return fmt.Errorf("setsid: %w", err)
		}
	}
	if d := os.Getenv(cgroupJoinEnv); d != "" {
		spec.Cgroups = append(spec.Cgroups, d) // the init could not clone it there
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, d := range spec.Cgroups {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), pid, 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	for file, value := range spec.Caps {
		if err := os.WriteFile(file, []byte(value), 0); err != nil {
			return fmt.Errorf("set %s: %w", file, err)
		}
	}
	if spec.Isolate != nil {
		// After the cgroup writes (the mounts layer makes
		// /sys/fs/cgroup read-only) and before the chdir (see cleanDir).
		if missing := spec.Isolate.apply(); len(missing) > 0 {
			if spec.Isolate.Require {
				return fmt.Errorf("--require-isolation: layer %s cannot be had here: %s", layerList(missing), missingWhy(missing))
			}
			if spec.Status != "" {
				spec.Status += " unisolated=" + layerList(missing)
			}
		}
	}
	if spec.Dir != "" {
		if err := os.Chdir(spec.Dir); err != nil {
			return fmt.Errorf("change directory: %w", err)
		}
	}
	return nil
}

// preparedExec holds what execve needs, the rlimits in the order they are
// set, and (encodeReports) the reports of execve's likely failures, all made before any
// rlimit is set: a Go process's address space is already larger than a
// typical mem_mb (RLIMIT_AS; `lockstep run` itself maps about 1.2 GiB,
// mostly reserved heap), so any allocation that grows the heap after the
// limits would be a fatal "out of memory" (exit 2) instead of the command
// or its refusal.
type preparedExec struct {
	path    string
	argv0   *byte
	argv    []*byte
	envv    []*byte
	limits  []rlimitV // RLIMIT_AS last: a failure before it may still allocate
	reports map[unix.Errno][]byte

	// What failed, set by limitAndExec.
	errno unix.Errno
	limit *rlimitV // the rlimit that could not be set, if that failed
}

// likelyExecErrnos are the execve failures whose reports are encoded ahead.
var likelyExecErrnos = []unix.Errno{unix.EACCES, unix.ENOENT, unix.ENOEXEC, unix.ETXTBSY, unix.EPERM,
	unix.ENOMEM, unix.E2BIG, unix.ELOOP, unix.ENOTDIR, unix.EISDIR, unix.ELIBBAD, unix.EFAULT, unix.EINVAL}

func prepareExec(path string, argv, env []string, rl []rlimitV) (*preparedExec, error) {
	ex := &preparedExec{path: path}
	var err error
	if ex.argv0, err = unix.BytePtrFromString(path); err != nil {
		return nil, err
	}
	if ex.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return nil, err
	}
	if ex.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return nil, err
	}
	for _, last := range []bool{false, true} {
		for _, r := range rl {
			if (r.Resource == unix.RLIMIT_AS) == last {
				ex.limits = append(ex.limits, r)
			}
		}
	}
	return ex, nil
}

// encodeReports encodes ahead the reports of likelyExecErrnos, for a
// caller that writes a failure to a report pipe after the limits (the
// re-executed child; Exec reports on stderr, once no limit binds memory,
// and skips this: 2 % of a run's CPU).
func (ex *preparedExec) encodeReports() error {
	ex.reports = make(map[unix.Errno][]byte, len(likelyExecErrnos))
	for _, e := range likelyExecErrnos {
		b, err := json.Marshal(childReport{Status: execStatus(e), Msg: execMessage(ex.path, e)})
		if err != nil {
			return err
		}
		ex.reports[e] = append(b, '\n')
	}
	return nil
}

// execStatus is the exit status for an execve failure: 127 not found, 126
// cannot execute.
func execStatus(e unix.Errno) int {
	if e == unix.ENOENT {
		return StatusNotFound
	}
	return StatusCannotExec
}

// execMessage says why execve of path failed with e.
func execMessage(path string, e unix.Errno) string {
	if e == unix.EACCES {
		return fmt.Sprintf("%s: %v (is it granted in [execute], and its interpreter and libraries in [execute] and [read]?)", path, e)
	}
	return fmt.Sprintf("%s: %v", path, e)
}

// message says what limitAndExec found failed.
func (ex *preparedExec) message() string {
	if ex.limit != nil {
		return fmt.Sprintf("set %s limit to %d: %v", ex.limit.Name, ex.limit.Value, ex.errno)
	}
	return execMessage(ex.path, ex.errno)
}

// limitAndExec stops the garbage collector, sets the rlimits and calls
// execve, allocating nothing from the first limit on. It returns only
// when something failed: the status and, when one was encoded ahead, the
// report to write; else the caller formats ex.message (no address-space
// limit is in force then, or the failure is an unexpected errno).
func (ex *preparedExec) limitAndExec(execve func(argv0 *byte, argv, envv []*byte) unix.Errno) (int, []byte) {
	debug.SetGCPercent(-1) // waits for a running cycle, starts no other
	for i := range ex.limits {
		r := &ex.limits[i]
		lim := unix.Rlimit{Cur: r.Value, Max: r.Value}
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(r.Resource), uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
			ex.errno, ex.limit = e, r
			return StatusRefused, nil
		}
	}
	ex.errno = execve(ex.argv0, ex.argv, ex.envv)
	return execStatus(ex.errno), ex.reports[ex.errno]
}

// rawExecve is execve(2) without the allocations of syscall.Exec.
func rawExecve(argv0 *byte, argv, envv []*byte) unix.Errno {
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return e
}

// restrictSelf builds the ruleset with go-landlock and enforces it on this
// (locked) thread, which then execs. Every right of rs's handled sets is
// handled; no best-effort downgrade happens (Compile already checked the ABI).
func restrictSelf(rs *Ruleset) error {
	cfg := golandlock.Config{
		HandledAccessFS:  golandlock.AccessFSSet(rs.HandledFS),
		HandledAccessNet: golandlock.AccessNetSet(rs.HandledNet),
		Scoped:           golandlock.ScopedSet(rs.Scoped),
	}
	if rs.Flags&landlock.RestrictLogNewExecOn != 0 {
		cfg = cfg.EnableLoggingForSubprocesses()
	}
	rules := make([]golandlock.Rule, 0, len(rs.Ports))
	for _, p := range rs.Ports {
		for bit := uint64(1); bit <= p.Access; bit <<= 1 {
			switch p.Access & bit {
			case landlock.NetBindTCP:
				rules = append(rules, golandlock.BindTCP(p.Port))
			case landlock.NetConnectTCP:
				rules = append(rules, golandlock.ConnectTCP(p.Port))
			case landlock.NetBindUDP:
				rules = append(rules, golandlock.BindUDP(p.Port))
			case landlock.NetConnectSendUDP:
				rules = append(rules, golandlock.ConnectSendUDP(p.Port))
			}
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("build the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("build the Landlock ruleset: nothing to restrict (BUG: Compile handles every right of the ABI)")
	}
	defer unix.Close(fd)
	for _, p := range rs.Paths {
		if err := addPathRule(fd, p); err != nil {
			return fmt.Errorf("build the Landlock ruleset: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self(flags=%#x): %w", flags, err)
	}
	return nil
}

// lookPath finds name as execve would through a shell: a name with a slash
// as is, else the first executable regular file of that name in env's PATH.
// The status is 127 when nothing is found, 126 when what is found cannot be
// executed.
func lookPath(name string, env []string) (string, int, error) {
	check := func(p string) (int, error) {
		st, err := os.Stat(p)
		if err != nil {
			return StatusNotFound, fmt.Errorf("%s: not found", p)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return StatusCannotExec, fmt.Errorf("%s: cannot execute: not an executable file (mode %v)", p, st.Mode())
		}
		return 0, nil
	}
	if strings.Contains(name, "/") {
		status, err := check(name)
		return name, status, err
	}
	pathEnv := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathEnv = v
		}
	}
	var firstBad error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		status, err := check(p)
		if err == nil {
			return p, 0, nil
		}
		if status == StatusCannotExec && firstBad == nil {
			firstBad = err
		}
	}
	if firstBad != nil {
		return "", StatusCannotExec, firstBad
	}
	return "", StatusNotFound, fmt.Errorf("%s: command not found in PATH=%s", name, pathEnv)
}
