package observer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const pinChildEnv = "LOCKSTEP_OBSERVER_PIN_CHILD"

// TestPinOneCPU: after pinOneCPU every thread of the process, and a
// process it starts, may run on one CPU only (the first one it had); after
// restore, on every CPU they had before. The pinning runs in a child (the
// test binary again), not in the test process.
func TestPinOneCPU(t *testing.T) {
	if os.Getenv(pinChildEnv) == "1" {
		pinChild()
		return
	}
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to pin")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinOneCPU$")
	cmd.Env = append(os.Environ(), pinChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var lists []string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "ALLOWED "); ok {
			lists = append(lists, v)
		}
	}
	if len(lists) < 4 {
		t.Fatalf("child printed %d CPU lists, want its threads' and its child's, pinned and restored:\n%s", len(lists), out)
	}
	var pinned, restored []string
	for _, l := range lists {
		if v, ok := strings.CutPrefix(l, "RESTORED "); ok {
			restored = append(restored, v)
		} else {
			pinned = append(pinned, l)
		}
	}
	for _, l := range pinned {
		if l != pinned[0] || strings.ContainsAny(l, ",-") {
			t.Errorf("pinned CPU lists %q: want one and the same single CPU everywhere", pinned)
			break
		}
	}
	for _, l := range restored {
		if !strings.ContainsAny(l, ",-") {
			t.Errorf("restored CPU lists %q: want every CPU the process had", restored)
			break
		}
	}
}

// pinChild pins itself and prints the CPU list of each of its threads and
// of a process it starts, one "ALLOWED <list>" line each.
func pinChild() {
	restore, err := pinOneCPU()
	if err != nil {
		fmt.Println("pinOneCPU:", err)
		os.Exit(1)
	}
	printAllowed("")
	if err := restore(); err != nil {
		fmt.Println("restore:", err)
		os.Exit(1)
	}
	printAllowed("RESTORED ")
}

// printAllowed prints the CPU list of a process this one starts and of
// each of its threads, one "ALLOWED <tag><list>" line each.
func printAllowed(tag string) {
	out, err := exec.Command("grep", "^Cpus_allowed_list:", "/proc/self/status").Output()
	if err != nil {
		fmt.Println("grep:", err)
		os.Exit(1)
	}
	fmt.Println("ALLOWED", tag+strings.TrimSpace(strings.TrimPrefix(string(out), "Cpus_allowed_list:")))
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				fmt.Println("ALLOWED", tag+strings.TrimSpace(v))
			}
		}
	}
}
