// Package engine is lockstep's one observed-run engine: it runs a command
// observed (under strace and the enforcer, with Landlock's audit records
// collected when a collector is given), cross-checks what strace attributes
// to Landlock against the kernel's own records, and joins the two views.
// The KVM run (package observer), repro, verify and the recording pruner
// all observe through it, and it knows nothing of guests' workflows.
//
//   - [Run]: a policy, the lockstep binary that applies it and a runner for
//     the command in; the command's status, strace's log, the refusals
//     attributed from it (confirmed by the control replay), the run's audit
//     records and their join ([CrossCheck]) out, as [Observed].
//   - [Observe] and [ObserveHere]: one [Run] with its audit window opened
//     on the running kernel, reported as an [Observation], the document
//     repro compares across kernels and verify's diagnosis carries.
//   - [CrossCheck] and [KernelPath]: the join, call by call, of strace's
//     refusals and the audit records, and the path the kernel names for an
//     object strace printed.
//   - [JudgeAudit], [JudgeTrace]: when a run's evidence is incomplete (lost
//     records, a missing deallocation barrier, trace lines the parser could
//     not read), as an [AbortError].
//   - [Slowed], [RunBound]: how a run's time limits scale
//     under TCG and how long a run may take.
//
// Every observation has three outcomes: held (pass), failed, indeterminate.
// Lost records, a missing deallocation barrier or a kernel below the pinned
// ABI make a result indeterminate, never a pass. See docs/selftest.md.
package engine
