package enforcer

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// selfPath is the executable re-executed as the enforcer child and the
// cgroup reaper: Options.Self, else this one ("" when it cannot be found;
// starting it then fails and says so).
func selfPath(opts Options) string {
	if opts.Self != "" {
		return opts.Self
	}
	self, _ := os.Executable()
	return self
}

func withoutRole(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, RoleEnv+"=") {
			out = append(out, e)
		}
	}
	return out
}

// startHook, when set (tests only), may change how the enforcer child is
// cloned into its cgroup (clone3 CLONE_INTO_CGROUP) before it is.
var startHook func(attr *syscall.SysProcAttr)

// noContainment turns off the containment cgroup (tests of the process-group
// kill alone).
var noContainment = false

// startChild starts the command and waits for it. A re-executed child
// (ChildMain) sets the rlimits, joins or is born in the cgroup, restricts
// itself and execs the command in place, so no thread of lockstep is ever
// in the command's Landlock domain: the signal and ptrace scopes keep the
// command from lockstep. (A direct path once restricted a thread of
// lockstep and forked the command from it, one Go start-up fewer; that
// thread had to live until the command ended, for the parent-death
// signal, and the command could SIGSTOP it, and so the whole of lockstep,
// to outlive its timeout, or ptrace it. docs/security.md.) The forking
// thread lives until the command has ended: the command's parent-death
// signal (SIGKILL, so that it dies with lockstep) fires when that thread
// ends, not when the process does.
func startChild(ctx context.Context, opts Options, prep *Prepared, cg *caps, spec *childSpec, iso *isolation) (int, error) {
	cmd, release, status, err := startReexec(opts, spec, cg, iso)
	if err != nil {
		return status, err
	}
	defer release()
	return wait(ctx, opts, prep, cg, cmd)
}

// onLockedThread runs start on a goroutine locked to its OS thread and keeps
// that thread until release is called (see startChild); the thread ends
// then, with whatever start did to it.
func onLockedThread(start func() error) (release func(), err error) {
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := start()
		errc <- err
		if err == nil {
			<-done
		}
	}()
	if err := <-errc; err != nil {
		return func() {}, err
	}
	return sync.OnceFunc(func() { close(done) }), nil
}

// commandStreams sets the command's streams and how it meets the caller's
// terminal. Whatever the streams, the command gets a seccomp filter that
// refuses TIOCSTI and TIOCLINUX (SyscallRules), and dies with lockstep
// (Pdeathsig). Then:
//
//   - stdin is lockstep's controlling terminal: the command stays in the
//     caller's session, in a process group of its own, made the foreground
//     group when lockstep is (so it may read the terminal, and Ctrl-C
//     reaches it). Taking it out of the session would lift job control: the
//     kernel stops a background reader (SIGTTIN) only on its controlling
//     terminal, so a command in a session of its own could read, behind
//     the caller's shell, what is typed to other programs.
//   - lockstep has a controlling terminal, but stdin is not it: a session
//     of its own (setsid), with no controlling terminal, so /dev/tty opens
//     nothing and no terminal signal of the caller's reaches it.
//   - lockstep has no controlling terminal (a CI job, the pruner): a
//     process group of its own, as there is no terminal to keep from the
//     command. A new session costs there: it is a new scheduler autogroup,
//     in which a [limits] run took 9 ms more on a loaded machine.
func commandStreams(opts Options, cmd *exec.Cmd) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	f, _ := cmd.Stdin.(*os.File)
	switch pg, ctty := controllingPgrp(f); {
	case ctty && pg == unix.Getpgrp():
		attr.Setpgid, attr.Foreground, attr.Ctty = true, true, 0
	case ctty || !hasControllingTerminal():
		attr.Setpgid = true
	default:
		attr.Setsid = true
	}
	cmd.SysProcAttr = attr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
}

// startReexec starts this executable as the enforcer child (ChildMain) and
// sends it its instructions. With one v2 cgroup the child is born in it
// (clone3 CLONE_INTO_CGROUP) and does not join: a write to cgroup.procs
// migrates a running process, which waits for an RCU grace period under the
// cgroup threadgroup lock (9.5 to 18 ms per run measured here); a clone
// into the cgroup does not.
func startReexec(opts Options, spec *childSpec, cg *caps, iso *isolation) (*exec.Cmd, func(), int, error) {
	self := selfPath(opts)
	if self == "" {
		return nil, nil, StatusRefused, errorf(ErrRefused, "find own executable to re-execute. Nothing ran.")
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, nil, StatusRefused, errorf(ErrRefused, "pipe: %v", err)
	}
	defer specR.Close()
	defer specW.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, nil, StatusRefused, errorf(ErrRefused, "pipe: %v", err)
	}
	defer repR.Close()
	defer repW.Close()
	cgfd := -1
	if cg.bornIn() && (!iso.init || iso.shell) {
		cgfd, err = unix.Open(cg.dirs[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, nil, StatusRefused, errorf(ErrRefused, "open cgroup %s: %v. Nothing ran.", cg.dirs[0], err)
		}
		defer unix.Close(cgfd)
	}
	files := []*os.File{specR, repW}
	var cmd *exec.Cmd
	var sent childSpec
	release, err := onLockedThread(func() error {
		cmd, sent = childCommand(opts, self, files, spec, cg, iso, cgfd)
		err := cmd.Start()
		if err != nil && cmd.SysProcAttr.UseCgroupFD {
			// clone3 into the cgroup refused (a kernel before 5.7, an
			// unusual cgroup set-up): the child joins it instead.
			cmd, sent = childCommand(opts, self, files, spec, cg, iso, -1)
			err = cmd.Start()
		}
		if err != nil && iso.clone != 0 {
			// Not root and no user namespaces, or a kernel without
			// one of them: the command runs without the layers,
			// named on the status line (or refused by the child
			// under RequireIsolation).
			iso.without(err)
			cmd, sent = childCommand(opts, self, files, spec, cg, iso, cgfd)
			err = cmd.Start()
		}
		return err
	})
	if err != nil {
		return nil, nil, StatusRefused, errorf(ErrRefused, "start the enforcer child %s: %v", self, err)
	}
	specR.Close()
	repW.Close()
	enc := json.NewEncoder(specW)
	encErr := enc.Encode(&sent)
	specW.Close()

	// The report pipe closes on exec (success) or carries the failure.
	rep, _ := io.ReadAll(repR)
	if len(rep) > 0 || encErr != nil {
		_ = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		release()
		var r childReport
		if err := json.Unmarshal(rep, &r); err != nil || r.Status == 0 {
			return nil, nil, StatusRefused, errorf(ErrRefused, "the enforcer child failed before exec: %q (spec: %v)", strings.TrimSpace(string(rep)), encErr)
		}
		switch r.Status {
		case StatusNotFound:
			return nil, nil, r.Status, errorf(ErrNotFound, "%s", r.Msg)
		case StatusCannotExec:
			return nil, nil, r.Status, errorf(ErrCannotExec, "%s", r.Msg)
		}
		return nil, nil, StatusRefused, errorf(ErrRefused, "%s. Nothing ran.", r.Msg)
	}
	return cmd, release, 0, nil
}

// childCommand is the command that starts the enforcer child, and the
// instructions to send it. The child (or, with the pid layer, the
// namespace's init) is cloned into its v2 cgroup through cgfd (-1: the
// child joins the cgroups itself). The init is initScript, run by
// initShell: a shell starts in about a millisecond, a second start of this
// Go program cost a run of `true` 4.6 ms more. Without the shell it is
// InitMain, which clones the child into the cgroup itself and stays out
// of it, so that its threads count against no nproc cap.
func childCommand(opts Options, self string, files []*os.File, spec *childSpec, cg *caps, iso *isolation, cgfd int) (*exec.Cmd, childSpec) {
	cmd := &exec.Cmd{
		Path:       self,
		Args:       []string{self},
		Env:        append(withoutRole(os.Environ()), RoleEnv+"="+ChildRole),
		ExtraFiles: files,
		WaitDelay:  time.Second,
	}
	commandStreams(opts, cmd)
	sent := *spec
	if len(iso.on) > 0 {
		is := iso.spec
		sent.Isolate = &is
	}
	iso.attr(cmd.SysProcAttr)
	shellInit := iso.init && iso.shell
	if file, value := cg.pidsMax(); file != "" {
		if shellInit && cgfd >= 0 {
			// The shell init is born in the cgroup too: one task, always.
			value = strconv.FormatInt(cg.nproc+1, 10)
		}
		sent.Caps = map[string]string{file: value}
	}
	if shellInit {
		place := initGroup
		if cmd.SysProcAttr.Setsid {
			place = initSession
		}
		cmd.Path, cmd.Args = initShell, []string{initShell, "-c", initScript, self, place}
		sent.DefaultSignals = true
	} else if iso.init {
		cgdir := ""
		if cg.bornIn() {
			cgdir, sent.Cgroups = cg.dirs[0], nil
		}
		cmd.Args = []string{self, initPlacement(cmd.SysProcAttr), cgdir}
		cmd.Env = append(withoutRole(os.Environ()), RoleEnv+"="+InitRole)
		return cmd, sent
	}
	if cmd.SysProcAttr.Setsid {
		// The child calls setsid itself, once its Go runtime is up: a Go
		// process started in a new session (a new scheduler autogroup)
		// took twice as long to start on a loaded machine (4.6 against
		// 9.9 ms for `lockstep help`).
		// Until then it stays in lockstep's process group, which it
		// cannot leave for a session while leading a group of its own.
		cmd.SysProcAttr.Setsid = false
		sent.Setsid = true
	}
	if cgfd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
		sent.Cgroups = nil
		if startHook != nil {
			startHook(cmd.SysProcAttr)
		}
	}
	return cmd, sent
}
