package engine

// archX8664 is the audit architecture of x86_64 (AUDIT_ARCH_X86_64).
const archX8664 = "c000003e"

// syscallsX8664 names the x86_64 system calls Landlock can refuse or that
// carry a refusal (arch/x86/entry/syscalls/syscall_64.tbl of Linux 7.2):
// the calls strace's TraceSet prints whose SYSCALL record a denial may share.
var syscallsX8664 = map[int]string{
	2: "open", 4: "stat", 6: "lstat", 16: "ioctl", 21: "access", 40: "sendfile",
	42: "connect", 44: "sendto", 46: "sendmsg", 49: "bind", 56: "clone", 57: "fork",
	58: "vfork", 59: "execve", 62: "kill", 76: "truncate", 77: "ftruncate",
	80: "chdir", 82: "rename", 83: "mkdir", 84: "rmdir", 85: "creat", 86: "link",
	87: "unlink", 88: "symlink", 101: "ptrace", 133: "mknod", 165: "mount",
	166: "umount2", 200: "tkill", 234: "tgkill", 257: "openat", 258: "mkdirat",
	259: "mknodat", 263: "unlinkat", 264: "renameat", 265: "linkat",
	266: "symlinkat", 285: "fallocate", 297: "rt_tgsigqueueinfo", 304: "open_by_handle_at", 307: "sendmmsg",
	316: "renameat2", 322: "execveat", 435: "clone3", 437: "openat2",
	129: "rt_sigqueueinfo", 424: "pidfd_send_signal",
}

// SyscallName returns the name strace prints for system call nr of the audit
// architecture arch; false for an architecture or call outside the table.
func SyscallName(arch string, nr int) (string, bool) {
	if arch != archX8664 {
		return "", false
	}
	name, ok := syscallsX8664[nr]
	return name, ok
}
