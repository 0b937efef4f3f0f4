// Package verify checks a base policy (plus optional exercise configs)
// against every exercise of a key on several kernels, a throwaway guest per
// (kernel, exercise) cell, run in parallel through the harness pool.
//
// # One cell
//
// Inside the guest ([Guest], the role [GuestRole] the cell's job names; it
// runs [Here] and writes the cell) an exercise is:
//
//  1. checked for rules the kernel cannot enforce (enforcer.CheckEnforceable:
//     a UDP row below Landlock ABI 10); any → fail, naming them;
//  2. run once unsandboxed, the reference; a reference that ran no tests or
//     failed for an infrastructure reason → indeterminate;
//  3. run JointRuns times (default 2) under the policy with `lockstep run`
//     (every layer, the policy's limits): joint verification holds when each
//     run's verdict is the reference's;
//  4. if it did not hold: one diagnosis run under strace and, where the
//     kernel offers them (ABI 7+), Landlock's audit records (engine.Observe),
//     naming each refused call, its object, rights, record and granting row
//     → fail;
//  5. if it held: the containment checks (evidence/contain) under the policy
//     (contain.Execute: canaries unreadable, a read-only file unwritable, an
//     unnamed loopback port neither reachable nor bindable, each limit
//     holding), run as `lockstep contain-probe` children → pass, or fail
//     naming the check that did not hold.
//
// # The matrix
//
// [Host] boots every cell through a harness.Pool and returns a [Result]: the
// kernels × exercises grid of pass, fail (with the refused calls) and
// indeterminate (with why: the guest did not report, a flaky or test-less
// reference, lost audit records). Status 0 all pass, 1 any fail, 3 any
// indeterminate and no fail.
package verify
