package guest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// zombie starts /bin/true as a child nobody waits for and returns its pid
// once it is a zombie.
func zombie(t *testing.T) int {
	t.Helper()
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if _, _, z, ok := parseStat(b); err == nil && ok && z {
			return pid
		}
	}
	t.Fatalf("child %d did not become a zombie", pid)
	return 0
}

// TestReapZombies: a zombie child is reaped (its /proc entry goes), the
// job's zombie is left for the job's own Wait.
func TestReapZombies(t *testing.T) {
	orphan, job := zombie(t), zombie(t)
	t.Cleanup(func() {
		var ws syscall.WaitStatus
		syscall.Wait4(job, &ws, 0, nil)
	})
	reapZombies(os.Getpid(), job)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", orphan)); err == nil {
		t.Errorf("zombie %d is still there", orphan)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", job)); err != nil {
		t.Errorf("the job's zombie %d was reaped: %v", job, err)
	}
}

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line          string
		pid, ppid     int
		zombie, valid bool
	}{
		{"42 (sleep) Z 1 42 42 0 -1", 42, 1, true, true},
		{"7 (a b) c)) S 3 7", 7, 3, false, true},
		{"7 (x) SS 3", 0, 0, false, false},
		{"(x) Z 1", 0, 0, false, false},
		{"9 (x) Z", 0, 0, false, false},
		{"9 x) Z 1", 0, 0, false, false},
	} {
		pid, ppid, z, ok := parseStat([]byte(c.line))
		if pid != c.pid || ppid != c.ppid || z != c.zombie || ok != c.valid {
			t.Errorf("parseStat(%q) = %d, %d, %v, %v; want %d, %d, %v, %v", c.line, pid, ppid, z, ok, c.pid, c.ppid, c.zombie, c.valid)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (sleep) Z 1 42 42 0 -1"))
	f.Add([]byte("7 (a b) c)) S 3 7"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pid, ppid, _, ok := parseStat(b)
		if ok && (pid <= 0 || ppid < 0) {
			t.Fatalf("parseStat(%q) = pid %d, ppid %d", b, pid, ppid)
		}
	})
}
