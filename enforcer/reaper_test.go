package enforcer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReaper: when the process that made a cgroup ends without removing it
// (its reaper's stdin closes, as at lockstep's SIGKILL), the reaper kills
// what is in it and removes it; after a normal end (cgroups removed first)
// it removes nothing and exits 0. Both through /bin/sh and, without it,
// through ReaperMain alone; for the containment cgroup and for caps.
func TestReaper(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"/bin/sh", "/nonexistent/sh"} {
		for _, setup := range []string{"containment", "caps"} {
			t.Run(filepath.Base(filepath.Dir(shell))+"/"+setup, func(t *testing.T) {
				saved := reaperShell
				reaperShell = shell
				defer func() { reaperShell = saved }()
				rp := &reaper{self: self}
				var c *caps
				if setup == "caps" {
					c = setupCaps(16, 0, rp)
				} else {
					c = setupContainment(rp)
				}
				if !c.ok() {
					t.Skipf("no %s cgroup here: %v", setup, c)
				}
				token := fmt.Sprintf("3603.%d", time.Now().UnixNano()%1_000_000_000)
				sleep := exec.Command("/usr/bin/sleep", token)
				if err := sleep.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan struct{})
				go func() { sleep.Wait(); close(exited) }()
				for _, d := range c.dirs {
					if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
						t.Fatalf("move the sleep into %s: %v", d, err)
					}
				}
				rp.close() // the maker "dies": its cgroups are still there
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					sleep.Process.Kill()
					t.Fatal("the reaper did not kill the process in the cgroup")
				}
				gone := func() bool {
					for _, d := range c.dirs {
						if _, err := os.Stat(d); err == nil {
							return false
						}
					}
					return true
				}
				for end := time.Now().Add(10 * time.Second); !gone() && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				if !gone() {
					t.Errorf("the reaper left %v", c.dirs)
				}
				c.remove()
			})
		}
	}
}

// TestReaperLeavesOthersAlone: the reaper touches only lockstep-* cgroups
// below CgroupRoot.
func TestReaperLeavesOthersAlone(t *testing.T) {
	for _, dir := range []string{"/tmp/lockstep-1-1", CgroupRoot + "/pids/user.slice", CgroupRoot + "/../lockstep-1-1", "lockstep-1-1"} {
		if reapable(dir) {
			t.Errorf("reapable(%q) = true", dir)
		}
	}
	if !reapable(CgroupRoot + "/unified/lockstep-12-3") {
		t.Error("reapable(a lockstep cgroup) = false")
	}
	if err := reap("/tmp"); err == nil {
		t.Error("reap(/tmp) did not refuse")
	}
}

// TestReaperWithNofileLowered: a reaper whose RLIMIT_NOFILE a command
// lowered to 3 (soft and hard: prlimit on a process of its uid) still
// kills what is in its cgroup and removes it: it raises the limit first
// (root may; others get the soft limit up to the hard one). Before, its
// Go runtime's first timer needed descriptors it could not open and it
// died with "netpollinit failed", leaving the cgroup and its processes.
func TestReaperWithNofileLowered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising a lowered hard limit needs root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := setupContainment(nil)
	if c == nil {
		t.Skip("no writable cgroup2 mount for a containment cgroup on this machine")
	}
	defer c.remove()
	sleep := exec.Command("/usr/bin/sleep", "3612")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Process.Kill()
	exited := make(chan struct{})
	go func() { sleep.Wait(); close(exited) }()
	if err := os.WriteFile(filepath.Join(c.dirs[0], "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	reaper := exec.Command("/usr/bin/prlimit", "--nofile=3:3", self, c.dirs[0])
	reaper.Env = append(os.Environ(), RoleEnv+"="+ReaperRole)
	out, err := reaper.CombinedOutput()
	if err != nil {
		t.Errorf("the reaper with nofile 3: %v\n%s", err, out)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatalf("the process in the cgroup outlived the reaper (which said %q)", out)
	}
	if _, err := os.Stat(c.dirs[0]); err == nil {
		t.Errorf("the reaper left %s", c.dirs[0])
	}
}

// TestRunReportsDeadReaper: a cgroup reaper that ends during the run (here
// killed; before the PID namespace a command could make it die) is an
// error Run reports, 125, for lockstep's cgroups would outlive a SIGKILL
// of it. Before, the run ended 0 as if nothing had happened.
func TestRunReportsDeadReaper(t *testing.T) {
	needHostLandlock(t)
	if c := setupContainment(nil); c == nil {
		t.Skip("no containment cgroup here: no reaper is started")
	} else {
		c.remove()
	}
	killed := make(chan int, 1)
	go func() {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			for _, pid := range childrenWith(os.Getpid(), "read -r d") {
				syscall.Kill(pid, syscall.SIGKILL)
				killed <- pid
				return
			}
		}
		killed <- 0
	}()
	r := runUnder(t, baseRules+"[read]\n/bin\n[execute]\n/bin\n", nil, "/bin/sh", "-c", "sleep 2")
	if pid := <-killed; pid == 0 {
		t.Fatal("found no reaper to kill")
	}
	if r.status != StatusRefused || r.err == nil || !strings.Contains(r.err.Error(), "cgroup reaper") {
		t.Errorf("Run with its reaper killed = %d, %v; want 125 saying the cgroup reaper ended", r.status, r.err)
	}
}

// childrenWith lists the children of ppid whose command line holds s.
func childrenWith(ppid int, s string) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
		if strings.Contains(string(cmdline), s) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			pids = append(pids, pid)
		}
	}
	return pids
}
