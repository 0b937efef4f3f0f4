package proctest

import (
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestKillSleeping finds and kills a real `sleep <token>`, and neither a
// sleep of another token nor one whose token only starts with it.
func TestKillSleeping(t *testing.T) {
	token := strconv.Itoa(300000 + time.Now().Nanosecond()%100000)
	start := func(arg string) *exec.Cmd {
		c := exec.Command("sleep", arg)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	mine, longer := start(token), start(token+"0")
	if got := KillSleeping(t, token); !slices.Equal(got, []int{mine.Process.Pid}) {
		t.Errorf("KillSleeping(%s) = %v; want [%d] (not %d, sleep %s0)", token, got, mine.Process.Pid, longer.Process.Pid, token)
	}
	if err := mine.Wait(); err == nil {
		t.Error("the sleep found was not killed")
	}
	if got := KillSleeping(t, token); len(got) != 0 {
		t.Errorf("KillSleeping after the kill = %v; want none", got)
	}
}
