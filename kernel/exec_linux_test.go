package kernel

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChildDiesWithLockstep: when the lockstep process is SIGKILLed (no
// chance to cancel), the command it ran (make, in the real case) gets
// SIGTERM from the kernel instead of building on orphaned.
func TestChildDiesWithLockstep(t *testing.T) {
	if os.Getenv("LOCKSTEP_KERNEL_TEST_PARENT") == "1" {
		// The helper: run a child that prints its pid and sleeps.
		c := command{log: (&Builder{}).log(), stdout: os.Stdout, stderr: os.Stderr}
		c.run(context.Background(), "sh", "-c", "echo $$; exec sleep 60")
		os.Exit(0)
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithLockstep$")
	helper.Env = append(os.Environ(), "LOCKSTEP_KERNEL_TEST_PARENT=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read child pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	helper.Process.Kill() // SIGKILL: no cancellation runs
	helper.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The orphan is reparented and reaped by init (or a subreaper);
		// until then it is a zombie, which counts as dead.
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still running 5s after lockstep was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
