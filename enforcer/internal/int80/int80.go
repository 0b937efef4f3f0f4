//go:build amd64

package int80

// Syscall makes system call nr of the i386 table with three 32-bit
// arguments and returns the kernel's result: a negative errno on failure.
// Arguments are truncated to 32 bits by the convention itself, so a
// pointer must point below 4 GiB. Where the kernel runs no 32-bit code
// (ia32_emulation off), the process dies of SIGSEGV: call it in a child.
func Syscall(nr, a1, a2, a3 uint32) int32
