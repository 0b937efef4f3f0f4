package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// withMarker lists the processes whose command line holds marker.
func withMarker(marker string) []int {
	var pids []int
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		data, err := os.ReadFile(f)
		if err == nil && bytes.Contains(data, []byte(marker)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// cgroupsOf lists the cgroup directories lockstep process pid made
// (lockstep-<pid>-<n>) that exist under enforcer.CgroupRoot.
func cgroupsOf(pid int) []string {
	prefix := fmt.Sprintf("lockstep-%d-", pid)
	var found []string
	_ = filepath.WalkDir(enforcer.CgroupRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), prefix) {
			found = append(found, p)
			return fs.SkipDir
		}
		return nil
	})
	return found
}

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// TestRunSignals: SIGHUP, SIGINT, SIGQUIT, SIGTERM or SIGKILL sent to
// `lockstep run` while its command sleeps leaves no process of the command
// (two sleeps, one of them outside the command's direct line: the
// marker is their argument) and no cgroup of lockstep's behind, on the direct
// path (containment cgroup) and on the re-executed one ([limits]: cgroup
// caps). A caught signal n ends lockstep with 128+n, not a goroutine dump
// (SIGQUIT) or a silent death (SIGHUP).
func TestRunSignals(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	policies := map[string]string{
		"direct": truePolicy + "[read]\n/dev/null\n",
		"limits": truePolicy + "[read]\n/dev/null\n[limits]\nnproc=64\nmem_mb=512\nnofile=64\n",
	}
	for _, path := range []string{"direct", "limits"} {
		cfg := filepath.Join(d, path+".cfg")
		if err := os.WriteFile(cfg, []byte(policies[path]), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGKILL} {
			t.Run(path+"/"+sig.String(), func(t *testing.T) {
				marker := fmt.Sprintf("30.%09d", rand.IntN(1e9))
				cmd := exec.Command(bin, "run", "-q", "--config", cfg, "--", "sh", "-c", `sleep "$0" & exec sleep "$0"`, marker)
				var errb bytes.Buffer
				cmd.Stderr = &errb
				// A command left running holds the stderr pipe: do not wait for it.
				cmd.WaitDelay = time.Second
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				pid := cmd.Process.Pid
				t.Cleanup(func() {
					for _, p := range withMarker(marker) {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				})
				// lockstep itself holds the marker too: wait for it and two sleeps.
				if !eventually(10*time.Second, func() bool { return len(withMarker(marker)) == 3 }) {
					t.Fatalf("the command did not start: processes %v with %s\n%s", withMarker(marker), marker, errb.String())
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("lockstep run after %v: %v, want an exit status\n%s", sig, err, errb.String())
				}
				ws := ee.Sys().(syscall.WaitStatus)
				switch {
				case sig == syscall.SIGKILL && !(ws.Signaled() && ws.Signal() == sig):
					t.Errorf("lockstep run after SIGKILL: %v", ws)
				case sig != syscall.SIGKILL && ee.ExitCode() != 128+int(sig):
					t.Errorf("lockstep run after %v: %v, want exit %d\n%s", sig, ws, 128+int(sig), errb.String())
				}
				if !eventually(5*time.Second, func() bool { return len(withMarker(marker)) == 0 && len(cgroupsOf(pid)) == 0 }) {
					t.Errorf("after %v of lockstep run: processes %v with %s and cgroups %v left\n%s",
						sig, withMarker(marker), marker, cgroupsOf(pid), errb.String())
				}
			})
		}
	}
}
