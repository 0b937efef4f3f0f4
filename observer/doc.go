// Package observer is lockstep's second observer: inside a throwaway guest on
// a pinned kernel it proves the kernel (Landlock ABI, LSM list, audit), reads
// Landlock's own audit records over netlink and cross-checks them, call by
// call, against what strace attributes to Landlock.
//
// # Layout
//
//   - [github.com/lockstep-sandbox/lockstep/observer/audit] parses audit
//     records in every form they arrive in (netlink body, /dev/kmsg, dmesg,
//     auditd's log) and, on Linux, collects them as the registered audit
//     daemon (go-libaudit, unicast), accepting only domains the run created.
//   - [github.com/lockstep-sandbox/lockstep/observer/proof] is the kernel
//     proof that runs before any exercise and behind `lockstep selftest`: the
//     release, the LSM list, the ABI, audit registration, then one deliberate
//     refusal per right class, each of which must produce exactly one record.
//
// # One observed run
//
// [RunObserved] is lockstep's one observed-run engine: a policy, the lockstep
// binary that applies it and a runner for the command in; the command's
// status, strace's log, the refusals attributed from it (confirmed by the
// control replay), the run's audit records and their join ([CrossCheck])
// out. The observer's exercise checks run on it directly; [ObserveHere] and
// [ObserveRun] render one run as an [Observation], the document package
// repro compares across kernels and package verify's diagnosis carries.
//
// # Outcomes
//
// Every observation has three outcomes: held (pass), failed, indeterminate.
// Lost records, a missing deallocation barrier or a kernel below the pinned
// ABI make a result indeterminate, never a pass. See docs/selftest.md.
package observer
