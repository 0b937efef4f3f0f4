package engine

import (
	"maps"
	"slices"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
)

// mountCalls change the mount topology, which Landlock refuses (EPERM) to
// a restricted process and audits as fs.change_topology.
var mountCalls = []string{"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fspick", "fsconfig", "mount_setattr"}

// TracedCalls are the system calls an observed run stops at and traces
// (strace.SeccompCommand): every call the attribution reads
// (attribute.TraceCalls), every call a Landlock record's SYSCALL record can
// name (syscallsX8664: the scoped signals, ptrace, the UDP sends among
// them), and the mount family. The rest (read, close, fstat, futex, …)
// neither refuses under Landlock nor carries what attribution needs;
// stopping at them was most of a traced run's cost under TCG.
func TracedCalls() []string {
	calls := attribute.TraceCalls()
	calls = append(calls, slices.Collect(maps.Values(syscallsX8664))...)
	calls = append(calls, mountCalls...)
	slices.Sort(calls)
	return slices.Compact(calls)
}
