// Package repro runs one command under one policy on two kernels and lines
// up, call by call, what each kernel's Landlock refused.
//
// A kernel is named as `lockstep repro --kernel` takes it: "host" (this
// machine's running kernel, observed in-process), a kernel pin (built and
// cached by package kernel) or a bzImage file; the last two boot a
// throwaway guest through package harness, whose job is repro's guest side
// ([Guest], the role [GuestRole]): the same [engine.ObserveHere] that
// observes the host.
//
// # One side
//
// [engine.ObserveHere], on observer's one observed-run engine
// ([engine.Run]), runs the command as `strace -f … lockstep run -q
// [--log-subprocesses] --config policy.cfg -- cmd…`. Where the kernel offers
// Landlock audit records (ABI 7 or more, and root), it registers as the
// audit daemon first (observer/audit) and joins each strace refusal with
// its records through engine.CrossCheck, the observer's own matching.
// Refusals are the calls strace saw fail inside the enforcer's domain that
// package evidence/attribute puts in the filesystem or network layer and the
// control replay (evidence/control) confirms would have succeeded unsandboxed.
// A policy row the kernel cannot enforce (a UDP rule below ABI 10) makes the
// enforcer exit 125 before anything runs: that side carries the rules it
// could not enforce, not refusals.
//
// # Two sides
//
// [Compare] pairs refusals by (system call, layer, objects), the n-th of a
// key on one kernel with the n-th on the other. A refusal with no partner is
// a difference (refused on one kernel, allowed on the other); a pair whose
// rights differ is a difference; a side that could not enforce the policy is
// a difference of its own kind (its refusals are then not compared, because
// nothing ran there). Each difference names the call, the object, the
// rights each kernel refused (Landlock's audit names: fs.read_file,
// net.bind_udp), the audit records behind each, and the policy rows that
// would grant it ([attribute.Refusal.Policy]).
//
// # Outcomes
//
// Status 0: both kernels refused the same; 1: they differ; 3: either side
// could not be observed (no report from the guest, lost audit records, the
// command not started). Indeterminate is never reported as 0.
package repro
