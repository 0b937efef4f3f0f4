// Package prune is the per-exercise pipeline of lockstep's layer pruner (the
// default prune): it ties packages exercise, strace, attribute, control,
// placement, search, limits and contain together and writes the policy and
// its schema-2 record.
//
// # Entry point
//
//	prune.ServeRoles() // first thing in main: Prune starts this program again
//	ex, _ := exercise.ReadDir("exercises/generic/shell-reference")
//	res, err := prune.Prune(ctx, ex, prune.Options{})
//	if err != nil { … }             // the pruner could not run at all
//	paths, err := res.Write(outDir)  // <key>_<ex>.cfg + .json, or .aborted.json
//
// With Options.Enforcer nil, the program that calls Prune is the enforcer
// and the containment probe; ServeRoles serves those roles when Prune starts
// it as one (see docs/pruner.md), so no lockstep CLI need be installed.
//
// Prune never returns an error for something the exercise did: an abort
// (a flaky or failing reference, a failure no refusal explains, a grow that
// does not converge, a failed joint verification, a containment check that
// did not hold, a defect of the pruner itself) is Result.Aborted, and Write
// then writes <key>_<ex>.aborted.json and no .cfg.
//
// # The stages
//
//  1. Baseline: three unsandboxed runs; each must pass every test
//     (verdict.ReferenceProblem) and agree with the first.
//  2. Grow (package search) from the seed: observed runs under
//     `strace … lockstep run --config candidate.cfg -- …`; every refusal is
//     attributed, replayed outside the sandbox (package control) and placed
//     (package placement); filesystem and network grants grow together
//     (Phobos grows them in two stages; lockstep's enforcer handles both in
//     one ruleset, so one stage sees both, with fewer runs).
//  3. Compaction (three read-class siblings become their parent), execute
//     narrowing and the hierarchy rule, then Minimise: a grant goes only after
//     two runs pass without it.
//  4. Limits (package limits): three sampled runs, margins, three runs under
//     the limits, a limit doubled on a signature (at most three times).
//  5. Joint verification: three runs under the final policy with every layer
//     on; a failure restores what minimisation removed once, else aborts.
//  6. Containment (package contain): canaries, a write into a read-only
//     path, an unnamed loopback port, an ungranted bind, one probe per limit.
//
// Every grant in the written policy has its refusals in the record's
// "grants" entry (run, call and errno), or says it came from the seed or is
// inherited from an ancestor by the hierarchy rule. EPERM never becomes a
// grant (package attribute puts it in layer "other").
//
// # Environment
//
//   - LOCKSTEP_DISPOSABLE=1 declares a machine Prune may change (it deletes
//     and recreates the working directory and plants canary files);
//     LOCKSTEP_GUEST=1, which a lockstep guest sets, counts as the same.
//     With neither, Prune refuses with ErrNotDisposable (see Disposable).
package prune
