package enforcer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// noFreeDescriptor lowers this process's RLIMIT_NOFILE soft limit to its
// lowest free descriptor, so that no file opens (EMFILE), as a command
// that prlimits lockstep's NOFILE to 3 makes it; restore undoes it.
func noFreeDescriptor(t *testing.T) (restore func()) {
	t.Helper()
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	low := saved
	low.Cur = uint64(fd)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	return func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &saved) }
}

// TestKillAllUnreadableProcsKillsCgroup: when cgroup.procs cannot be
// opened (no file opens: the command lowered lockstep's RLIMIT_NOFILE to
// 3), killAll still kills what is in the cgroup, through the cgroup.kill
// and cgroup.procs it kept open from set-up, and says it is empty only
// when it read so; a cgroup known by path alone (the reaper's) is killed
// as far as can be and reported as possibly not empty, never as empty.
// Before, killAll read no pids, returned nil, and the process lived on
// (a `setsid -f sleep` outlived `lockstep run`'s timeout).
func TestKillAllUnreadableProcsKillsCgroup(t *testing.T) {
	if c := setupContainment(nil); c == nil {
		t.Skip("no writable cgroup2 mount for a containment cgroup on this machine")
	} else {
		c.remove()
	}
	for _, kept := range []bool{true, false} {
		t.Run(map[bool]string{true: "kept descriptors", false: "by path"}[kept], func(t *testing.T) {
			c := setupContainment(nil)
			defer c.remove()
			sleep := exec.Command("/usr/bin/sleep", "3607")
			if err := sleep.Start(); err != nil {
				t.Fatal(err)
			}
			defer sleep.Process.Kill()
			exited := make(chan struct{})
			go func() { sleep.Wait(); close(exited) }()
			if err := os.WriteFile(filepath.Join(c.dirs[0], "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
				t.Fatalf("move the sleep into %s: %v", c.dirs[0], err)
			}
			if !kept {
				c.closeKept()
			}
			restore := noFreeDescriptor(t)
			err := c.killAll(500 * time.Millisecond)
			restore()
			select {
			case <-exited:
				if !kept {
					t.Logf("killed without a kept descriptor; killAll said %v", err)
				}
			case <-time.After(2 * time.Second):
				if kept {
					t.Fatalf("the sleep in the cgroup is alive after killAll (which said %v)", err)
				}
			}
			switch {
			case kept && err != nil:
				t.Errorf("killAll with its descriptors kept = %v; want nil (it could read the cgroup empty)", err)
			case !kept && err == nil:
				t.Errorf("killAll that could read no cgroup.procs = nil; want an error (processes may be left)")
			}
		})
	}
}
