// Package int80 makes a system call in the i386 convention (int $0x80)
// from a 64-bit process, as 32-bit code on an x86-64 kernel does. The
// enforcer's tests use it to see the seccomp filter refuse compat calls
// for real; nothing else should.
package int80
