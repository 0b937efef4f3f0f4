// Package recorder is lockstep's recording pruner: it runs a program that a
// person uses (a REPL typed into, a terminal tool) with no sandbox, under
// strace, inside a throwaway guest, and turns every call that succeeded into
// a policy with the layer pruner's own generalisation.
//
// The recorded program runs unsandboxed. The guest is what keeps the host
// safe: its root is the host's, read-only, under a tmpfs overlay that dies
// with it, and every session starts from the same root by construction.
//
// A recording lives in a directory D/N (Dir): one sub-directory per
// session (Run adds one), and what Generate writes beside them
// (policy.cfg, record.json). The four steps:
//
//   - [Run] boots a fresh guest whose job is the role [GuestRole]: it copies
//     the exercise into the working directory the policies name
//     (/var/tmp/testing-dir), lists the starting state, runs the command
//     under strace on a pseudo-terminal driven by a [Script], and brings the
//     trace back.
//   - [Generate] turns every session's successful calls into needs
//     (evidence/attribute.Uses), places them (derive/placement.Grants and
//     NetworkRules) and writes the policy and its record.
//   - [Diff] compares a policy with what the sessions used.
//   - [Check] replays a scripted session in a fresh guest under the
//     generated policy with the audit observer (engine.Run) and
//     fails on each call that succeeded while recording and is now refused.
package recorder
