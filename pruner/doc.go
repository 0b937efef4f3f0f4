// Package pruner is lockstep's layer pruner as a Go library: it decides
// what a policy permits by running a reference exercise under a policy that
// grants nothing and granting exactly what each recorded refusal proves
// (the algorithm of Phobos's exercise pruner).
//
// This package holds no code; the work is in its subpackages, which other
// Go programs import directly. The entry point:
//
//   - [github.com/lockstep-sandbox/lockstep/pruner/prune] prunes one
//     exercise ([github.com/lockstep-sandbox/lockstep/pruner/prune.Prune]):
//     baseline, grow, minimise, limits, joint verification and containment,
//     then the policy and its record (or an abort record). It ties the
//     packages below together.
//
// One observed run:
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
//   - [github.com/lockstep-sandbox/lockstep/pruner/verdict] reads a run's
//     status, log and JUnit reports together; two runs agree only when the
//     same tests ran with the same outcomes.
//
// The search and what it produces:
//
//   - [github.com/lockstep-sandbox/lockstep/pruner/search] grows a policy
//     from refusals until the exercise behaves as its reference, then
//     minimises it.
//   - [github.com/lockstep-sandbox/lockstep/pruner/generalise] decides where
//     a grant lands (which path a refused access becomes) and tidies a set
//     of grants.
//   - [github.com/lockstep-sandbox/lockstep/pruner/limits] measures what an
//     exercise uses and derives the policy's [limits] section with margins.
//   - [github.com/lockstep-sandbox/lockstep/pruner/pinned] holds a pinned
//     read root (prune.json pinned_read_roots) to its manifest of SHA-256
//     sums, so a policy may read the whole tree as one entry.
//   - [github.com/lockstep-sandbox/lockstep/pruner/contain] proves the
//     forbidden direction: canaries, read-only paths, unnamed ports and each
//     limit are refused under the final policy.
//   - [github.com/lockstep-sandbox/lockstep/pruner/cold] starts every run
//     from the root file system's own state: a mount namespace of its own
//     whose system paths are overlays thrown away after the run.
//
// Inputs, outputs and merging:
//
//   - [github.com/lockstep-sandbox/lockstep/pruner/exercise] discovers
//     exercises, reads their prune.json and runs one in a fresh working
//     directory.
//   - [github.com/lockstep-sandbox/lockstep/pruner/record] holds the records
//     written beside each policy (schema-2 exercise record, abort record,
//     the KVM run's ABI-10 record) and their hashes.
//   - [github.com/lockstep-sandbox/lockstep/pruner/orchestrate] merges the
//     exercises' policies and ABI-10 sidecars into the shipped bases.
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
