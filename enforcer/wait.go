package enforcer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// wait waits for the started command, enforcing the timeout and the cgroup
// caps, and kills whatever the command leaves in its process group or
// cgroup.
func wait(ctx context.Context, opts Options, prep *Prepared, cg *caps, cmd *exec.Cmd) (int, error) {
	pgid := cmd.Process.Pid
	killGroup := func(sig syscall.Signal) {
		_ = syscall.Kill(-pgid, sig)
		// The re-executed child leads no group until its setsid.
		_ = syscall.Kill(pgid, sig)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// cmd.Wait also waits for the output pipes, which a leftover process
	// may hold open; learn of the exit itself without reaping (WNOWAIT),
	// so the leftovers die at once.
	exited := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		close(exited)
	}()
	var timer <-chan time.Time
	if prep.timeout > 0 {
		t := time.NewTimer(prep.timeout)
		defer t.Stop()
		timer = t.C
	}
	var poll <-chan time.Time
	if cg.ok() && (cg.pidsEv != "" || cg.memEv != "") {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		poll = tk.C
	}
	grace := opts.KillGrace
	if grace == 0 {
		grace = 2 * time.Second
	}
	var why error
	var waitErr error
	var hardKill <-chan time.Time
	ctxDone := ctx.Done()
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-exited:
			exited = nil
			killGroup(syscall.SIGKILL)
			_ = cg.killAll(time.Second)
		case <-timer:
			timer = nil
			why = errorf(ErrTimeout, "timeout %s passed; process group killed", prep.timeout)
			killGroup(syscall.SIGTERM)
			hardKill = time.After(grace)
		case <-hardKill:
			killGroup(syscall.SIGKILL)
			_ = cg.killAll(time.Second)
		case <-poll:
			if msg := cg.passed(); msg != "" && why == nil {
				why = errorf(ErrCapPassed, "%s; every process of the command killed", msg)
				killGroup(syscall.SIGKILL)
				_ = cg.killAll(time.Second)
				poll = nil
			}
		case <-ctxDone:
			ctxDone = nil
			if why == nil {
				why = errorf(ErrInterrupted, "interrupted (%v); process group killed", context.Cause(ctx))
			}
			killGroup(syscall.SIGKILL)
			_ = cg.killAll(time.Second)
		}
	}
	// Nothing the command started outlives it.
	killGroup(syscall.SIGKILL)
	leftErr := cg.killAll(2 * time.Second)
	if why == nil {
		if msg := cg.passed(); msg != "" {
			why = errorf(ErrCapPassed, "%s; every process of the command killed", msg)
		}
	}
	restoreForeground(cmd)
	if why != nil && leftErr != nil {
		why = fmt.Errorf("%w; and %v", why, leftErr) // never silent on leftovers
	}
	if why != nil {
		return Status(why), why
	}
	if leftErr != nil {
		return StatusRefused, errorf(ErrRefused, "%v", leftErr)
	}
	return exitStatus(cmd.ProcessState, waitErr)
}

func exitStatus(ps *os.ProcessState, waitErr error) (int, error) {
	if ps == nil {
		return StatusRefused, errorf(ErrRefused, "wait for the command: %v", waitErr)
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.ExitCode(), nil
	}
	switch {
	case ws.Exited():
		return ws.ExitStatus(), nil
	case ws.Signaled():
		return 128 + int(ws.Signal()), nil
	}
	return StatusRefused, errorf(ErrRefused, "unexpected wait status %v", ws)
}

// hasControllingTerminal reports whether this process has a controlling
// terminal: /dev/tty opens only then (ENXIO otherwise).
func hasControllingTerminal() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// controllingPgrp reports whether f is this process's controlling terminal
// (TIOCGPGRP answers only on that one) and, if so, its foreground process
// group.
func controllingPgrp(f *os.File) (pgrp int, ctty bool) {
	if f == nil {
		return 0, false
	}
	pg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return pg, err == nil
}

// restoreForeground gives the terminal back to our process group after a
// command that had it (tcsetpgrp from a background group needs SIGTTOU
// ignored).
func restoreForeground(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Foreground {
		return
	}
	f, ok := cmd.Stdin.(*os.File)
	if !ok {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
}
