package strace

import "strings"

// TraceSet is the -e trace= set lockstep traces a command with: every file,
// network, process and descriptor call, plus the calls the domain tracking
// and the fixed rules need.
const TraceSet = "%file,%network,%process,%desc,landlock_restrict_self,setsid,setpgid,ioctl"

// Command returns the argv that runs argv under strace exactly as the
// pruner does, writing the trace to out:
//
//	strace -f -qq -y -s 4096 -e trace=<TraceSet> -o out argv…
//
// (--seccomp-bpf is deliberately absent: a seccomp-bpf SECCOMP_RET_TRACE
// loses to a user-notification filter, so guarded calls would vanish from
// the trace.)
func Command(out string, argv ...string) []string {
	return command(out, nil, TraceSet, argv)
}

// command is strace with the flags every trace of lockstep's needs (-f
// every thread and child, -y the paths of descriptors, -s 4096 whole
// paths), then extra, the trace set and the output file, then argv.
func command(out string, extra []string, trace string, argv []string) []string {
	args := append([]string{"strace", "-f", "-qq", "-y", "-s", "4096"}, extra...)
	return append(append(args, "-e", "trace="+trace, "-o", out), argv...)
}

// SeccompCommand returns the argv that runs argv under strace stopping at
// the named system calls only, writing the trace to out:
//
//	strace -f -qq -y -s 4096 --seccomp-bpf -e trace=<calls> -o out argv…
//
// Without --seccomp-bpf, strace stops every thread at every system call,
// entry and exit, and drops what -e trace= leaves out only when it
// prints; with it, a seccomp filter strace installs before the command
// starts (inherited by every child) stops only at the calls named, and
// the others run at full speed. The filter's SECCOMP_RET_TRACE loses to
// any other filter's refusal (SECCOMP_RET_ERRNO, KILL, TRAP, USER_NOTIF),
// so a call another filter of the process refuses is not in the trace:
// under lockstep run, an ioctl enforcer's terminal filter refuses
// (TIOCSTI, TIOCLINUX: EPERM, never Landlock's).
func SeccompCommand(out string, calls []string, argv ...string) []string {
	return command(out, []string{"--seccomp-bpf"}, strings.Join(calls, ","), argv)
}
