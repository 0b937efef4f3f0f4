package enforcer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCgroupPidsSkipsNonPositive: a 0 in cgroup.procs (a process the reader
// cannot name in its pid namespace) must never reach kill(2), where 0 is the
// killer's own process group and -1 every process.
func TestCgroupPidsSkipsNonPositive(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0\n4242\n-1\n17\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := cgroupPids(dir); err != nil || !slices.Equal(got, []int{4242, 17}) {
		t.Fatalf("cgroupPids = %v, %v; want [4242 17]", got, err)
	}
}
