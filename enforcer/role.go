package enforcer

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// StatusNotStartedByRun is the exit status of a process that has
// RoleEnv=ChildRole in its environment without having been started by Run:
// whoever set the variable called lockstep wrongly, a usage error
// (docs/exit-codes.md), and nothing ran.
const StatusNotStartedByRun = 2

// startedByRun says why this process, which has RoleEnv=ChildRole, was not
// started by Run, or returns nil when it was. Run hands its child the
// instructions on a pipe at fd 3 and the report pipe at fd 4; a shell that
// exported LOCKSTEP_ROLE leaves them closed or something else. Without this
// the child read no instructions, reported to a descriptor nobody reads and
// exited 125 in silence.
func startedByRun() error {
	for _, p := range []struct {
		fd   int
		what string
	}{{3, "its instruction pipe"}, {4, "its report pipe"}} {
		var st unix.Stat_t
		if err := unix.Fstat(p.fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return fmt.Errorf("%s=%s is set, but this process was not started by lockstep run (fd %d is not %s): unset %s", RoleEnv, ChildRole, p.fd, p.what, RoleEnv)
		}
	}
	return nil
}
