package attribute

import (
	"slices"

	"github.com/lockstep-sandbox/lockstep/landlock"
)

// trackedCalls are the successful calls whose lines carry state a later
// refusal needs (Attributor.track, and the strace parser's domain
// tracking): the enforcer's and the command's domains, working
// directories, socket types and bound sockets.
var trackedCalls = []string{
	"landlock_restrict_self", "execve", "execveat", "chdir", "fchdir",
	"clone", "clone3", "fork", "vfork", "socket", "bind",
}

// fixedCalls are the calls refusal puts in the fixed layer by name.
var fixedCalls = []string{"setsid", "setpgid", "socket", "socketpair"}

// TraceCalls lists, sorted, every system call whose strace line
// attribution reads: the calls Landlock can refuse (landlock.Syscalls), the
// calls a limit's errno is read from, those refused by a fixed rule, and
// the successful calls it tracks. A trace of these alone attributes as the
// whole trace does (TestTraceCallsAttributeAlike), except for the working
// directory a call outside the list revealed through its AT_FDCWD
// annotation before any listed call of the thread did.
func TraceCalls() []string {
	var calls []string
	for name := range landlock.Syscalls {
		calls = append(calls, name)
	}
	for _, l := range limitCalls {
		calls = append(calls, l.calls...)
	}
	calls = append(calls, trackedCalls...)
	calls = append(calls, fixedCalls...)
	slices.Sort(calls)
	return slices.Compact(calls)
}
