package enforcer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseProcCgroup(t *testing.T) {
	data := readTestdata(t, "proc-self-cgroup-hybrid.txt")
	for _, tc := range []struct{ ctl, want string }{
		{"", "/"},
		{"pids", "/"},
		{"memory", "/process_api/a4a5317f88034db15f08b244172ee2eb"},
	} {
		if got, err := parseProcCgroup(data, tc.ctl); got != tc.want || err != nil {
			t.Errorf("parseProcCgroup(%q) = %q, %v; want %q", tc.ctl, got, err, tc.want)
		}
	}
	if _, err := parseProcCgroup(data, "rdma"); err == nil {
		t.Error("parseProcCgroup(rdma): no error, want one naming the missing hierarchy")
	}
}

func TestParseEvent(t *testing.T) {
	if n := parseEvent(readTestdata(t, "pids.events-v1.txt"), "max"); n != 0 {
		t.Errorf("pids.events max = %d, want 0", n)
	}
	if n := parseEvent(readTestdata(t, "memory.oom_control-v1.txt"), "oom_kill"); n != 0 {
		t.Errorf("memory.oom_control oom_kill = %d, want 0", n)
	}
	if n := parseEvent([]byte("low 0\nhigh 3\nmax 1\noom 2\noom_kill 2\n"), "oom_kill"); n != 2 {
		t.Errorf("memory.events oom_kill = %d, want 2", n)
	}
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add(readTestdata(f, "proc-self-cgroup-hybrid.txt"), "memory")
	f.Add([]byte("0::/user.slice/user-1000.slice/session-2.scope\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, ctl string) {
		p, err := parseProcCgroup(data, ctl)
		if err == nil && !strings.HasPrefix(p, "/") {
			t.Errorf("parseProcCgroup = %q without error, want an absolute path", p)
		}
		if err != nil && p != "" {
			t.Errorf("parseProcCgroup = %q with error %v", p, err)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add(readTestdata(f, "memory.oom_control-v1.txt"), "oom_kill")
	f.Add(readTestdata(f, "pids.events-v1.txt"), "max")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		if n := parseEvent(data, key); n < 0 {
			t.Errorf("parseEvent = %d, want >= 0", n)
		}
	})
}
