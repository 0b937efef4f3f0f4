package enforcer

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BlockedIoctls are the terminal ioctls no sandboxed command may issue, on
// any descriptor: both put bytes into a terminal's input, where the
// caller's shell reads them as typed and runs them outside the sandbox.
// TIOCSTI pushes one byte; TIOCLINUX's paste subcommand pastes the console
// selection. The kernel lets TIOCSTI through for CAP_SYS_ADMIN on any
// terminal, controlling or not and whatever dev.tty.legacy_tiocsti says,
// so neither a new session nor the sysctl stops a command run as root;
// Landlock's IOCTL_DEV right does not cover a descriptor opened before the
// ruleset (the inherited stdin). A seccomp filter does, for root too.
var BlockedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// clone3 answers ENOSYS under the filter, as in Docker's default seccomp
// profile: its CLONE_INTO_CGROUP puts the child in any cgroup the caller
// may write by DAC, and Landlock neither checks the O_PATH open of the
// cgroup's directory nor the clone. So a command run as root, granted
// nothing under /sys, could start a child in the root cgroup, out of its
// containment cgroup and its caps, and leave it running after lockstep.
// C libraries fall back to clone(2) on ENOSYS, which has no cgroup option.
const clone3Nr = 435 // the same number in every convention of syscallABIs

// syscallABI is one system call convention a process of this architecture
// may use, and its ioctl numbers there. A 64-bit kernel also runs 32-bit
// code (int 0x80 on x86-64, AArch32 on arm64), whose ioctl has another
// number: a filter that knew only the native one would be walked round.
type syscallABI struct {
	audit  uint32
	ioctl  []uint32
	clone3 []uint32
}

// x32Bit marks a system call of the x32 ABI (native audit architecture).
const x32Bit = 0x40000000

// syscallABIs lists them per GOARCH, the native convention first.
var syscallABIs = map[string][]syscallABI{
	"amd64": {
		// 514 is x32's own ioctl; 16 with the x32 bit is refused by the
		// kernel, and filtered too in case it ever is not.
		{unix.AUDIT_ARCH_X86_64, []uint32{unix.SYS_IOCTL, x32Bit | unix.SYS_IOCTL, x32Bit | 514}, []uint32{clone3Nr, x32Bit | clone3Nr}},
		{unix.AUDIT_ARCH_I386, []uint32{54}, []uint32{clone3Nr}},
	},
	"arm64": {
		{unix.AUDIT_ARCH_AARCH64, []uint32{unix.SYS_IOCTL}, []uint32{clone3Nr}},
		{unix.AUDIT_ARCH_ARM, []uint32{54}, []uint32{clone3Nr}},
	},
}

// Offsets into struct seccomp_data: nr, arch, then args[6] of 8 bytes each
// from 16. The low half of args[1] (the ioctl request, an unsigned int to
// the kernel, which ignores the high half) is at 24 on the little-endian
// architectures of syscallABIs.
const (
	seccompNr        = 0
	seccompArch      = 4
	seccompArg1Low   = 24
	bpfLoadAbs       = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJumpIfEqual   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfReturn        = unix.BPF_RET | unix.BPF_K
	seccompAllow     = unix.SECCOMP_RET_ALLOW
	seccompDenyEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
)

// terminalFilter builds the seccomp program: for each calling convention,
// an ioctl whose request is in BlockedIoctls fails with EPERM, clone3 with
// ENOSYS (clone3Nr); every other system call is allowed. A system call of
// an architecture not listed fails with ENOSYS (none exists on the
// architectures listed).
func terminalFilter(abis []syscallABI) ([]unix.SockFilter, error) {
	if len(abis) == 0 {
		return nil, fmt.Errorf("no seccomp table for %s: the terminal-injection filter cannot be built", runtime.GOARCH)
	}
	type insn struct {
		unix.SockFilter
		jt, jf string // jump targets by label; "" is the next instruction
	}
	var prog []insn
	labels := map[string]int{}
	emit := func(code uint16, k uint32, jt, jf string) {
		prog = append(prog, insn{unix.SockFilter{Code: code, K: k}, jt, jf})
	}
	emit(bpfLoadAbs, seccompArch, "", "")
	for i, a := range abis {
		next := fmt.Sprintf("abi%d", i+1)
		emit(bpfJumpIfEqual, a.audit, "", next)
		emit(bpfLoadAbs, seccompNr, "", "")
		for _, nr := range a.ioctl {
			emit(bpfJumpIfEqual, nr, "request", "")
		}
		for _, nr := range a.clone3 {
			emit(bpfJumpIfEqual, nr, "nosys", "")
		}
		emit(bpfReturn, seccompAllow, "", "")
		labels[next] = len(prog)
	}
	labels["nosys"] = len(prog)
	emit(bpfReturn, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS), "", "")
	labels["request"] = len(prog)
	emit(bpfLoadAbs, seccompArg1Low, "", "")
	for _, req := range BlockedIoctls {
		emit(bpfJumpIfEqual, req, "deny", "")
	}
	emit(bpfReturn, seccompAllow, "", "")
	labels["deny"] = len(prog)
	emit(bpfReturn, seccompDenyEPERM, "", "")

	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		out[i] = in.SockFilter
		for _, j := range []struct {
			label string
			off   *uint8
		}{{in.jt, &out[i].Jt}, {in.jf, &out[i].Jf}} {
			if j.label == "" {
				continue
			}
			d := labels[j.label] - (i + 1)
			if d < 0 || d > 255 {
				return nil, fmt.Errorf("seccomp jump to %s out of range (%d)", j.label, d)
			}
			*j.off = uint8(d)
		}
	}
	return out, nil
}

// blockTerminalInjection installs the filter on the calling thread (no
// TSYNC: only the thread that then execs the command, in the enforcer
// child or with --exec, gets it). It needs no_new_privs, which
// restrictSelf set.
func blockTerminalInjection() error {
	prog, err := terminalFilter(syscallABIs[runtime.GOARCH])
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install the seccomp filter refusing TIOCSTI and TIOCLINUX: %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}
