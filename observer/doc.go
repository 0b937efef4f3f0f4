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
// Every run the observer makes goes through the observed-run engine,
// [github.com/lockstep-sandbox/lockstep/observer/engine]: this package is
// the KVM run's workflow on top of it (the proof, the reference runs, the
// cross-check, the ABI-10 schedule of joint runs, diagnosis and
// containment, the records), on the guest side ([Guest]) and the host side
// ([Host]). The KVM record it writes is
// [github.com/lockstep-sandbox/lockstep/observer/kvmrecord].
//
// # Outcomes
//
// Every observation has three outcomes: held (pass), failed, indeterminate.
// Lost records, a missing deallocation barrier or a kernel below the pinned
// ABI make a result indeterminate, never a pass. See docs/selftest.md.
package observer
