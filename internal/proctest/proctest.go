package proctest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// KillSleeping returns the pids of the processes `sleep token` (those two
// arguments exactly, from /proc/<pid>/cmdline), each sent SIGKILL first so
// that a test that finds one leaves none behind.
func KillSleeping(t testing.TB, token string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := "sleep\x00" + token + "\x00"
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.HasPrefix(string(b), want) {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
			pids = append(pids, pid)
		}
	}
	return pids
}
