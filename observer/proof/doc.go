// Package proof proves, inside a guest, that the kernel that booted is the
// kernel lockstep meant and that its Landlock audit records can be trusted:
// the release string equals the pin's, landlock is in the LSM list, the
// Landlock ABI is at least the pin's, audit is enabled with this process
// registered as the audit daemon (backlog 8192, rate limit 0), and one
// deliberate refusal per right class produces exactly one LANDLOCK_ACCESS
// record naming the expected blocker and object, joined through its SYSCALL
// record to the refused process and system call.
//
// Each refusal runs in its own child process (lockstep re-executed in the
// hidden role [Role]), restricted to a fresh domain that handles only the
// right under test, so domains never stack and the record's blockers are
// exactly that right. Rights the kernel's ABI does not offer are "not
// offered", never tried.
//
// [Run] is what `lockstep selftest` runs in the guest, and what the observer
// runs before any exercise. The outcome of each check is held, failed,
// indeterminate or not offered; the [Report] status is 0, 1 or 3, and a
// kernel whose ABI is below the pin's is status 3, never 0. See
// docs/selftest.md.
package proof
