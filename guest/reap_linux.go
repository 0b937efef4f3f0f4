package guest

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reapOrphans reaps, until stop is closed, every zombie child of this
// process but job, on each SIGCHLD and once a second. PID 1 becomes the
// parent of every process whose parent died (a build's child after the
// enforcer killed the build at its time limit), and a zombie nobody reaps
// keeps its credentials, and with them its Landlock domain: the kernel
// writes the domain's deallocation record only when the last of them is
// freed, so the observer waited its full bound for a record that never
// came. The job itself is left to its own Wait.
func reapOrphans(job int, stop <-chan struct{}) {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	self := os.Getpid()
	for {
		reapZombies(self, job)
		select {
		case <-stop:
			return
		case <-sig:
		case <-tick.C:
		}
	}
}

// reapZombies waits for each zombie in /proc whose parent is self, job
// excepted.
func reapZombies(self, job int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, ppid, zombie, ok := parseStat(b)
		if ok && zombie && ppid == self && pid != job {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// parseStat reads the pid, the parent's pid and whether the process is a
// zombie from a /proc/<pid>/stat line: "pid (comm) state ppid …", where
// comm may hold spaces and parentheses, so the fields after it are found
// from the last ')'.
func parseStat(b []byte) (pid, ppid int, zombie, ok bool) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return 0, 0, false, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return 0, 0, false, false
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil || ppid < 0 {
		return 0, 0, false, false
	}
	return pid, ppid, f[0][0] == 'Z', true
}
