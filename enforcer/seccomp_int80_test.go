//go:build amd64

package enforcer

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/internal/int80"
	"golang.org/x/sys/unix"
)

// int80Env makes this test binary make i386 system calls (int $0x80) and
// print their results, on a thread under the filter when it is "filtered".
const int80Env = "LOCKSTEP_TEST_INT80"

func init() {
	if mode := os.Getenv(int80Env); mode != "" {
		os.Exit(int80Probe(mode == "filtered"))
	}
}

// int80Calls are the i386 calls the probe makes, with their arguments.
var int80Calls = []struct {
	name       string
	a1, a2, a3 uint32
}{
	{"getpid", 0, 0, 0},
	{"keyctl", unix.KEYCTL_GET_KEYRING_ID, 0xfffffffc /* KEY_SPEC_USER_KEYRING */, 0},
	{"ioctl", 0 /* a pty, below */, kdKDSKBENT, 0},
	{"setns", 0xffffffff, 0, 0},
	{"perf_event_open", 0, 0, 0xffffffff},
}

func int80Probe(filtered bool) int {
	runtime.LockOSThread()
	pty, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if filtered {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := installSeccompFilter(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	for _, c := range int80Calls {
		row, _ := sysnumOf(c.name)
		a1 := c.a1
		if c.name == "ioctl" {
			a1 = uint32(pty)
		}
		fmt.Printf("%s %d\n", c.name, int80.Syscall(uint32(row.nr[convI386]), a1, c.a2, c.a3))
	}
	return 0
}

// int80Results runs the probe in a child and returns name -> result, or
// false if the child died of a signal (no 32-bit system calls here).
func int80Results(t *testing.T, mode string) (map[string]int, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), int80Env+"="+mode)
	out, err := cmd.Output()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, false
	}
	if err != nil {
		t.Fatalf("%s probe: %v\n%s", mode, err, out)
	}
	res := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var name string
		var v int
		if _, err := fmt.Sscanf(line, "%s %d", &name, &v); err != nil {
			t.Fatalf("%s probe printed %q", mode, line)
		}
		res[name] = v
	}
	return res, true
}

// TestFilterRefusesI386: the filter holds for 32-bit system calls (int
// $0x80, the i386 table's numbers) made by a process under it, as for
// native ones: keyctl, a keyboard ioctl, setns and perf_event_open get
// -EPERM where, unfiltered, the kernel answered otherwise; getpid still
// works.
func TestFilterRefusesI386(t *testing.T) {
	plain, ok := int80Results(t, "plain")
	if !ok {
		t.Skip("this kernel runs no 32-bit system calls (int $0x80 killed the probe)")
	}
	filtered, _ := int80Results(t, "filtered")
	t.Logf("unfiltered %v, filtered %v", plain, filtered)
	if plain["getpid"] <= 0 || filtered["getpid"] <= 0 {
		t.Errorf("getpid: unfiltered %d, filtered %d; want a pid both times", plain["getpid"], filtered["getpid"])
	}
	for _, name := range []string{"keyctl", "ioctl", "setns", "perf_event_open"} {
		if filtered[name] != -int(unix.EPERM) || plain[name] == -int(unix.EPERM) {
			t.Errorf("i386 %s: unfiltered %d, filtered %d; want -EPERM only under the filter", name, plain[name], filtered[name])
		}
	}
}
