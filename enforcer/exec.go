package enforcer

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"golang.org/x/sys/unix"
)

// Exec replaces the calling process with opts.Command under opts.Policy:
// the same checks as Run (Prepare), the same Landlock ruleset, the seccomp
// filter refusing terminal injection and the scrubbed environment, then
// execve(2) in place, with no child, no cgroup and no reaper. It returns
// only when nothing of the command ran: the status (125, 126, 127) and why.
//
// It has none of the isolation layers (Layers): the status line names them
// (unisolated=), and RequireIsolation refuses.
//
// It saves what a run spends beside the command (about 1.7 ms of a run of
// `true`: docs/performance.md), and gives up what needs a process that
// outlives the command: whatever the command leaves running (a background
// job, a setsid daemon) is not killed, a command killed by signal n is seen
// by the caller as killed, not as exit 128+n, and a timeout or a cgroup cap
// cannot be kept, so a policy with [limits] timeout, nproc or mem_mb is
// refused. The other [limits] are rlimits and are set.
//
// The command gets this process's descriptors 0, 1 and 2 (Stdin, Stdout,
// Stderr, Self and KillGrace are not used; every other descriptor is closed
// on exec). It stays in the caller's process group and session; when this
// process has a controlling terminal and stdin is not it, the command is
// taken off that terminal, as Run does (see takeOffTerminal).
func Exec(opts Options) (int, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return StatusRefused, errorf(ErrRefused, "no command given")
	}
	prep, err := Prepare(opts)
	if err != nil {
		return Status(err), err
	}
	if err := execLimitsAllowed(prep); err != nil {
		return Status(err), err
	}
	unisolated := execUnisolated(prep)
	if opts.RequireIsolation && unisolated != "" {
		return StatusRefused, errorf(ErrRefused, "--require-isolation: layer %s cannot be had with --exec (the command runs in place, in lockstep's own namespaces): run without --exec, or switch them off with --without. Nothing ran.", unisolated)
	}
	path, env, status, err := execTarget(opts)
	if err != nil {
		return status, err
	}
	if err := takeOffTerminal(); err != nil {
		return StatusRefused, errorf(ErrRefused, "%v. Nothing ran.", err)
	}
	ex, err := prepareExec(path, opts.Command, env, prep.rlimits)
	if err != nil {
		return StatusCannotExec, errorf(ErrCannotExec, "%s: %v", path, err)
	}
	// Landlock, no_new_privs and the seccomp filter belong to a thread;
	// execve keeps the calling thread's and ends every other one.
	runtime.LockOSThread()
	if err := restrictSelf(prep.Ruleset); err != nil {
		return StatusRefused, errorf(ErrRefused, "%v. Nothing ran.", err)
	}
	if err := installSeccompFilter(); err != nil {
		return StatusRefused, errorf(ErrRefused, "%v. Nothing ran.", err)
	}
	if !opts.Quiet {
		var w io.Writer = os.Stderr
		if opts.Stderr != nil {
			w = opts.Stderr
		}
		line := prep.StatusLine("")
		if unisolated != "" {
			line += " unisolated=" + unisolated
		}
		fmt.Fprintln(w, line)
	}
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	status, _ = ex.limitAndExec(rawExecve)
	kind := ErrCannotExec
	if status == StatusNotFound {
		kind = ErrNotFound
	}
	if ex.limit != nil {
		kind = ErrRefused
	}
	return status, errorf(kind, "%s", ex.message())
}

// execTarget changes to opts.Dir and finds the command in the PATH of its
// environment (opts.Env, or the caller's safe variables), as the child
// would: the path to execute and the environment, or the status and why.
func execTarget(opts Options) (path string, env []string, status int, err error) {
	env = opts.Env
	if env == nil {
		env = CommandEnv(os.Environ(), nil)
	}
	env = withoutRole(env)
	if opts.Dir != "" {
		if err := os.Chdir(opts.Dir); err != nil {
			return "", nil, StatusRefused, errorf(ErrRefused, "change directory: %v. Nothing ran.", err)
		}
	}
	path, status, err = lookPath(opts.Command[0], env)
	if err != nil {
		kind := ErrNotFound
		if status == StatusCannotExec {
			kind = ErrCannotExec
		}
		return "", nil, status, errorf(kind, "%v", err)
	}
	return path, env, 0, nil
}

// execUnisolated lists the isolation layers not switched off: running in
// place, the command has none of them.
func execUnisolated(prep *Prepared) string {
	var on []string
	for _, n := range LayerNames() {
		if !slices.Contains(prep.off, n) {
			on = append(on, n)
		}
	}
	return strings.Join(on, ",")
}

// execLimitsAllowed refuses the [limits] Exec cannot keep: a timeout and
// the cgroup caps need a process that outlives the exec.
func execLimitsAllowed(prep *Prepared) error {
	var names []string
	if prep.timeout > 0 {
		names = append(names, string(policy.Timeout))
	}
	if prep.nproc > 0 {
		names = append(names, string(policy.NProc))
	}
	if prep.memMB > 0 {
		names = append(names, string(policy.MemMB))
	}
	if len(names) == 0 {
		return nil
	}
	return errorf(ErrRefused, "[limits] %s: kept by a process beside the command (a timer, a cgroup cap), which running in place has not; run without --exec. Nothing ran.", strings.Join(names, ", "))
}

// takeOffTerminal gives the command what Run's commandStreams gives it when
// this process has a controlling terminal that is not stdin: no controlling
// terminal, so /dev/tty opens nothing and no terminal signal of the
// caller's reaches it. A new session does that; a process group leader (a
// shell's job) cannot start one, so it gives the terminal up with
// TIOCNOTTY, which for a process that does not lead its session touches
// only itself. A session leader would hang up its foreground group with
// TIOCNOTTY: refused. When stdin is the controlling terminal, or there is
// none, nothing changes: the command stays in the caller's session and
// process group, as any program the caller executes.
func takeOffTerminal() error {
	if !hasControllingTerminal() {
		return nil
	}
	if _, ctty := controllingPgrp(os.Stdin); ctty {
		return nil
	}
	if _, err := unix.Setsid(); err == nil {
		return nil
	}
	sid, err := unix.Getsid(0)
	if err != nil {
		return fmt.Errorf("getsid: %w", err)
	}
	if sid == os.Getpid() {
		return fmt.Errorf("this process leads its session and has a controlling terminal that is not stdin; the command cannot be taken off it in place: run without --exec")
	}
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/tty to give it up: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetInt(fd, unix.TIOCNOTTY, 0); err != nil {
		return fmt.Errorf("give up the controlling terminal (TIOCNOTTY): %w", err)
	}
	return nil
}
