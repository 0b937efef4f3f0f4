package enforcer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
