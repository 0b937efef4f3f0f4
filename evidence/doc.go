// Package evidence holds no code; its subpackages turn one observed run
// into evidence, and the layer pruner (pruner/prune), the KVM observer
// (observer) and the recording pruner (recorder) all read a run through
// them:
//
//   - [github.com/lockstep-sandbox/lockstep/evidence/strace] parses the output
//     of lockstep's strace command into calls and tracks which threads are
//     inside a Landlock domain.
//   - [github.com/lockstep-sandbox/lockstep/evidence/attribute] turns each
//     failed call inside the domain into a refusal: its layer, and the
//     sections, Landlock rights, paths or ports a grant would need.
//   - [github.com/lockstep-sandbox/lockstep/evidence/control] replays a
//     candidate refusal outside every sandbox; only an access that succeeds
//     there can have been Landlock's.
//   - [github.com/lockstep-sandbox/lockstep/evidence/verdict] reads a run's
//     status, log and JUnit reports together; two runs agree only when the
//     same tests ran with the same outcomes.
//   - [github.com/lockstep-sandbox/lockstep/evidence/contain] proves the
//     forbidden direction: canaries, read-only paths, unnamed ports and each
//     limit are refused under a final policy.
package evidence
