package enforcer

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReaperRole is the RoleEnv value that makes a re-executed lockstep (or any
// binary importing this package) the cgroup reaper.
const ReaperRole = "cgroup-reaper"

// reaper is a process that removes the command's cgroups when the process
// that made them dies without doing it: killed by SIGKILL, nothing of
// lockstep runs any more, and a cgroup directory outlives its processes
// until someone removes it. The reaper is started, in a process group of
// its own (a kill of lockstep's process group does not reach it, nor does
// a terminal's signal, which goes to the foreground group), before the
// first cgroup is made; each cgroup's path is written to its
// stdin before the mkdir, so no cgroup exists that it does not know.
//
// The waiting is done by a small /bin/sh loop (reaperScript), not by a Go
// process: a second Go start-up per run cost more than the run itself (a
// run of `true` went from 6.3 to 10.5 ms under load). When its stdin ends
// (lockstep closed it after removing the cgroups, or died) and a cgroup it
// was told of is still there, it executes this binary as ReaperMain, which
// kills what is left and removes them. After a normal run nothing is
// there and the shell just exits. Without /bin/sh, ReaperMain waits itself.
type reaper struct {
	self    string         // the executable that reaps
	w       *os.File       // its stdin
	started chan *exec.Cmd // the started reaper, nil if it could not start
}

// failed says why the reaper cannot do its work, if it cannot: it could
// not be started, or it ended before its stdin did (killed: it never
// exits by itself before). Lockstep would then leave its cgroups behind
// should it be killed, so a run reports it. nil when all is well or no
// reaper was needed.
func (r *reaper) failed() error {
	if r == nil || r.w == nil {
		return nil
	}
	cmd := <-r.started
	r.started <- cmd // for close
	if cmd == nil {
		return errors.New("the cgroup reaper could not be started")
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err == nil && info.Signo != 0 {
		return fmt.Errorf("the cgroup reaper (pid %d) ended during the run, before lockstep was done with its cgroups", cmd.Process.Pid)
	}
	return nil
}

// reaperShell runs reaperScript; a variable so the tests can take it away.
var reaperShell = "/bin/sh"

// reaperScript collects the cgroup paths until stdin ends, then hands any
// that still exists to the reaper role ($0, with RoleEnv already in its
// environment). Signals that end lockstep must not end it.
const reaperScript = `trap '' HUP INT QUIT TERM PIPE
while IFS= read -r d; do set -- "$@" "$d"; done
for d; do [ -d "$d" ] && exec "$0" "$@"; done
exit 0`

// announce tells the reaper, starting it on first use, that dir is about to
// be made. The path goes into the reaper's stdin pipe at once; the reaper
// itself is started beside the command, not before it (its fork and exec
// cost a run of `true` 3 ms on a loaded machine), and reads it when up.
// A nil reaper announces nothing (CgroupCaps' probe cgroup).
func (r *reaper) announce(dir string) error {
	if r == nil {
		return nil
	}
	if r.w == nil {
		if err := r.start(); err != nil {
			return err
		}
	}
	if _, err := r.w.WriteString(dir + "\n"); err != nil {
		return fmt.Errorf("tell the cgroup reaper: %w", err)
	}
	return nil
}

func (r *reaper) start() error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start the cgroup reaper: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        r.self,
		Args:        []string{r.self},
		Env:         []string{RoleEnv + "=" + ReaperRole},
		Stdin:       pr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if unix.Access(reaperShell, unix.X_OK) == nil {
		cmd.Path, cmd.Args = reaperShell, []string{reaperShell, "-c", reaperScript, r.self}
	}
	r.w, r.started = pw, make(chan *exec.Cmd, 1)
	go func() {
		defer pr.Close()
		if cmd.Start() != nil {
			r.started <- nil
			return
		}
		r.started <- cmd
	}()
	return nil
}

// close ends the reaper's stdin: once up, it reads the paths it was told,
// finds them removed (or removes what is left) and exits. Nothing waits for
// it here: its exit is collected in the background (a caller that runs
// many commands keeps no zombie), and lockstep run exits without it.
func (r *reaper) close() {
	if r == nil || r.w == nil {
		return
	}
	r.w.Close()
	r.w = nil
	go func(started <-chan *exec.Cmd) {
		if cmd := <-started; cmd != nil {
			_ = cmd.Wait()
		}
	}(r.started)
}

// ReaperMain is the reaper's entry point (the package's init calls it with
// RoleEnv=ReaperRole): it kills every process left in each cgroup named by
// its arguments and removes it; with no argument it first reads the paths
// from stdin until it ends. Only directories named lockstep-* below
// CgroupRoot are touched.
func ReaperMain() int {
	// Whatever ends lockstep must not end its reaper too.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGPIPE)
	raiseNofile()
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			dirs = append(dirs, sc.Text())
		}
	}
	// Its stdin has ended: closing it frees a descriptor for the cgroup
	// files, should the limit leave none (3: stdin, stdout, stderr).
	unix.Close(0)
	status := 0
	// Children before parents: none is nested today, but a v2 parent
	// cannot go before its children.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := reap(dirs[i]); err != nil {
			fmt.Fprintf(os.Stderr, "lockstep cgroup reaper: %v\n", err)
			status = 1
		}
	}
	return status
}

// reaperNofile is the RLIMIT_NOFILE the reaper wants at least: the Go
// runtime's first timer needs an epoll descriptor and an eventfd, and a
// limit of 3 (lowered by a command with prlimit on a process of its uid)
// killed the reaper with "netpollinit failed" before it reaped anything.
const reaperNofile = 64

// raiseNofile raises this process's RLIMIT_NOFILE to reaperNofile when it
// is below (the hard limit too, which needs CAP_SYS_RESOURCE; without it
// the soft limit goes as high as the hard one allows).
func raiseNofile() {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil || lim.Cur >= reaperNofile {
		return
	}
	want := unix.Rlimit{Cur: reaperNofile, Max: max(lim.Max, reaperNofile)}
	if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) != nil {
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
}

// reapable reports whether dir is a cgroup lockstep made.
func reapable(dir string) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir &&
		strings.HasPrefix(dir, CgroupRoot+"/") && strings.HasPrefix(filepath.Base(dir), "lockstep-")
}

// reap empties and removes one cgroup; one already gone is fine.
func reap(dir string) error {
	if !reapable(dir) {
		return fmt.Errorf("%q is not a lockstep cgroup; left alone", dir)
	}
	var st0 unix.Stat_t
	if unix.Stat(dir, &st0) == unix.ENOENT {
		return nil
	}
	var st unix.Statfs_t
	v2 := unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
	c := &caps{v2: v2, dirs: []string{dir}, created: []string{dir}}
	killErr := c.killAll(5 * time.Second)
	if err := c.remove(); err != nil {
		return fmt.Errorf("remove %s: %v (%v)", dir, err, killErr)
	}
	return nil
}
