package enforcer

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
