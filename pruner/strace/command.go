package strace

// TraceSet is the -e trace= set lockstep traces a command with: every file,
// network, process and descriptor call, plus the calls the domain tracking
// and the fixed rules need.
const TraceSet = "%file,%network,%process,%desc,landlock_restrict_self,setsid,setpgid,ioctl"

// Command returns the argv that runs argv under strace exactly as the
// pruner and the observer do, writing the trace to out:
//
//	strace -f -qq -y -s 4096 -e trace=<TraceSet> -o out argv…
//
// (--seccomp-bpf is deliberately absent: a seccomp-bpf SECCOMP_RET_TRACE
// loses to a user-notification filter, so guarded calls would vanish from
// the trace.)
func Command(out string, argv ...string) []string {
	return append([]string{"strace", "-f", "-qq", "-y", "-s", "4096", "-e", "trace=" + TraceSet, "-o", out}, argv...)
}
