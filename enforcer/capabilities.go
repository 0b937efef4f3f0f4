package enforcer

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DroppedCapabilities are the capabilities a command run as root loses:
// each lets a process act where Landlock and the [limits] do not look.
// CAP_SYS_RESOURCE raises a hard rlimit (nofile, fsize_mb, cpu, mem_mb's
// RLIMIT_AS); CAP_NET_RAW and CAP_NET_ADMIN send packets past the
// [connect] and [bind] rules (a raw socket) or change the network;
// CAP_SYS_MODULE, CAP_SYS_BOOT, CAP_SYS_RAWIO, CAP_SYS_TIME, CAP_SYSLOG,
// CAP_SYS_PTRACE, CAP_BPF, CAP_PERFMON, CAP_MAC_*, CAP_AUDIT_CONTROL and
// CAP_MKNOD reach the kernel and other processes directly; CAP_SYS_NICE
// raises a process to SCHED_FIFO or a negative nice, starving the host;
// CAP_AUDIT_WRITE sends user messages into the host's audit log (forged
// records, and what the observer's audit collector reads); CAP_SYS_PACCT
// turns on process accounting for the host; CAP_SYS_TTY_CONFIG hangs up
// terminals (vhangup) and reconfigures virtual consoles not the
// command's. The seccomp filter (SyscallRules) refuses their calls too,
// where no build needs them. CAP_SYS_ADMIN stays: without it and
// CAP_SYS_RESOURCE the kernel would hold a root command to RLIMIT_NPROC
// counted over every root process of the machine, not the command's own
// (the nproc cap is the pids cgroup's job); what it opens past Landlock is
// refused call by call in SyscallRules.
var DroppedCapabilities = []uintptr{
	unix.CAP_SYS_RESOURCE, unix.CAP_NET_RAW, unix.CAP_NET_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_BOOT,
	unix.CAP_SYS_RAWIO, unix.CAP_SYS_TIME, unix.CAP_SYSLOG, unix.CAP_SYS_PTRACE, unix.CAP_BPF,
	unix.CAP_PERFMON, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE, unix.CAP_AUDIT_CONTROL, unix.CAP_MKNOD,
	unix.CAP_SYS_NICE, unix.CAP_AUDIT_WRITE, unix.CAP_SYS_PACCT, unix.CAP_SYS_TTY_CONFIG,
}

// dropCapabilities takes DroppedCapabilities out of the calling thread's
// bounding and inheritable sets and clears its ambient set, so that the
// command it executes next does not have them: root's capabilities after
// execve are its inheritable set and its bounding set. A thread without
// CAP_SETPCAP (not root) could not drop them, and has none of them to
// gain by an exec under no_new_privs: it is left as it is.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) == 0 {
		return nil
	}
	for _, c := range DroppedCapabilities {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
		data[c/32].Inheritable &^= 1 << (c % 32)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	return nil
}
