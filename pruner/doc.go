// Package pruner is lockstep's layer pruner as a Go library: it decides
// what a policy permits by running a reference exercise under a policy that
// grants nothing and granting exactly what each recorded refusal proves.
//
// This package holds no code; the work is in its subpackages, which other
// Go programs import directly. What the pruner shares with the KVM observer
// and the recording pruner lives outside it, in packages of their own:
// the evidence of one observed run ([github.com/lockstep-sandbox/lockstep/evidence]), the policy derivation
// ([github.com/lockstep-sandbox/lockstep/derive]), the exercises ([github.com/lockstep-sandbox/lockstep/exercise]), the records
// ([github.com/lockstep-sandbox/lockstep/record]) and the merge into bases ([github.com/lockstep-sandbox/lockstep/orchestrate]).
//
// The layer pruner's own packages:
//
//   - [github.com/lockstep-sandbox/lockstep/pruner/prune] prunes one
//     exercise ([github.com/lockstep-sandbox/lockstep/pruner/prune.Prune]):
//     baseline, grow, minimise, limits, joint verification and containment,
//     then the policy and its record (or an abort record). It ties the
//     packages below and the shared ones together.
//   - [github.com/lockstep-sandbox/lockstep/pruner/search] grows a policy
//     from refusals until the exercise behaves as its reference, then
//     minimises it.
//   - [github.com/lockstep-sandbox/lockstep/pruner/cold] starts every run
//     from the root file system's own state: a mount namespace of its own
//     whose system paths are overlays thrown away after the run.
//   - [github.com/lockstep-sandbox/lockstep/pruner/readroot] holds a pinned
//     read root (prune.json pinned_read_roots) to its manifest of SHA-256
//     sums, so a policy may read the whole tree as one entry.
//
// The flow of one observed run: run the exercise with
// [github.com/lockstep-sandbox/lockstep/evidence/strace.Command] around
// `lockstep run --config candidate.cfg -- …`, parse the trace, attribute
// every call ([github.com/lockstep-sandbox/lockstep/evidence/attribute.Refusals]),
// keep the grantable refusals whose control replay succeeds
// ([github.com/lockstep-sandbox/lockstep/evidence/control.Replay]), and add
// their needs to the candidate. A failed run none of whose refusals can be
// attributed never becomes a grant; the exercise aborts instead.
//
// Destructive steps (replacing the working directory, deleting what a run
// left) run only in a disposable environment: a guest, or a host with
// LOCKSTEP_DISPOSABLE=1.
package pruner
