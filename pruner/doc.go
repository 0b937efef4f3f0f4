// Package pruner is lockstep's layer pruner as a Go library: it decides
// what a policy permits by running a reference exercise under a policy that
// grants nothing and granting exactly what each recorded refusal proves
// (the algorithm of Phobos's exercise pruner, reference part B).
//
// This package holds no code; the work is in its subpackages, which other
// Go programs import directly:
//
//   - [github.com/lockstep-sandbox/lockstep/pruner/strace] parses the output
//     of the pruner's strace command into calls and tracks which threads
//     are inside a Landlock domain.
//   - [github.com/lockstep-sandbox/lockstep/pruner/attribute] turns each
//     failed call inside the domain into a refusal: its layer, and the
//     sections, Landlock rights, paths or ports a grant would need.
//   - [github.com/lockstep-sandbox/lockstep/pruner/control] replays a
//     candidate refusal outside every sandbox; only an access that succeeds
//     there can have been Landlock's.
//   - pruner/verdict (status, log and JUnit reports → same outcome),
//     pruner/exercise (discovery, prune.json, one run), pruner/record (the
//     schema-2 records) and pruner/orchestrate (merging exercises into
//     bases).
//
// The flow of one observed run: run the exercise with
// [github.com/lockstep-sandbox/lockstep/pruner/strace.Command] around
// `lockstep run --config candidate.cfg -- …`, parse the trace, attribute
// every call ([github.com/lockstep-sandbox/lockstep/pruner/attribute.Refusals]),
// keep the grantable refusals whose control replay succeeds
// ([github.com/lockstep-sandbox/lockstep/pruner/control.Replay]), and add
// their needs to the candidate. A failed run none of whose refusals can be
// attributed never becomes a grant; the exercise aborts instead.
//
// Destructive steps (replacing the working directory, deleting what a run
// left) run only in a disposable environment: a guest, or a host with
// LOCKSTEP_DISPOSABLE=1.
package pruner
