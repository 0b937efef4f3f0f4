package enforcer

import (
	"encoding/binary"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// runBPF interprets the classic-BPF subset terminalFilter emits over one
// struct seccomp_data (little-endian), returning the filter's verdict.
func runBPF(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLoadAbs:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case bpfJumpIfEqual:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfReturn:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x not interpreted", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

func seccompData(arch, nr uint32, arg1 uint64) []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[seccompNr:], nr)
	binary.LittleEndian.PutUint32(b[seccompArch:], arch)
	binary.LittleEndian.PutUint64(b[16+8:], arg1)
	return b
}

// TestTerminalFilter: the filter refuses TIOCSTI and TIOCLINUX through every
// calling convention of each architecture (32-bit compat and x32 included),
// with the request's ignored high bits set too, and allows other ioctls and
// other system calls.
func TestTerminalFilter(t *testing.T) {
	const deny, allow, nosys = seccompDenyEPERM, seccompAllow, unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	for goarch, abis := range syscallABIs {
		prog, err := terminalFilter(abis)
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		for _, a := range abis {
			for _, nr := range a.ioctl {
				for _, tc := range []struct {
					arg1 uint64
					want uint32
				}{
					{unix.TIOCSTI, deny},
					{unix.TIOCLINUX, deny},
					{1<<32 | unix.TIOCSTI, deny},
					{0xffffffff<<32 | unix.TIOCLINUX, deny},
					{unix.TCGETS, allow},
					{unix.TIOCGWINSZ, allow},
					{unix.TIOCSTI + 1<<8, allow},
				} {
					if got := runBPF(t, prog, seccompData(a.audit, nr, tc.arg1)); got != tc.want {
						t.Errorf("%s arch %#x ioctl nr %#x request %#x: verdict %#x, want %#x", goarch, a.audit, nr, tc.arg1, got, tc.want)
					}
				}
			}
			for _, nr := range a.clone3 {
				if got := runBPF(t, prog, seccompData(a.audit, nr, 0)); got != nosys {
					t.Errorf("%s arch %#x clone3 nr %#x: verdict %#x, want ENOSYS", goarch, a.audit, nr, got)
				}
			}
			if len(a.clone3) == 0 {
				t.Errorf("%s arch %#x: clone3 not filtered", goarch, a.audit)
			}
			// Another system call with a TIOCSTI-looking argument passes.
			if got := runBPF(t, prog, seccompData(a.audit, 1, unix.TIOCSTI)); got != allow {
				t.Errorf("%s arch %#x syscall 1: verdict %#x, want allow", goarch, a.audit, got)
			}
		}
		if got := runBPF(t, prog, seccompData(0x1234, 16, unix.TIOCSTI)); got != nosys {
			t.Errorf("%s unknown arch: verdict %#x, want ENOSYS", goarch, got)
		}
	}
	if _, ok := syscallABIs[runtime.GOARCH]; !ok {
		t.Errorf("no seccomp table for %s: lockstep run refuses every command there", runtime.GOARCH)
	}
}

// TestTerminalFilterInstalls: the filter loads into the kernel on a thread
// with no_new_privs (a locked thread, which the test leaves to die) and
// then refuses TIOCSTI on a real pty with EPERM, while TCGETS still works.
func TestTerminalFilterInstalls(t *testing.T) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(m)
	errc := make(chan [2]error)
	go func() {
		runtime.LockOSThread() // never unlocked: the filtered thread dies with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- [2]error{err, nil}
			return
		}
		if err := blockTerminalInjection(); err != nil {
			errc <- [2]error{err, nil}
			return
		}
		c := byte('x')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		_, getErr := unix.IoctlGetTermios(m, unix.TCGETS)
		errc <- [2]error{e, getErr}
	}()
	got := <-errc
	if got[0] != unix.EPERM || got[1] != nil {
		t.Errorf("under the filter: TIOCSTI %v (want EPERM), TCGETS %v (want nil)", got[0], got[1])
	}
}
