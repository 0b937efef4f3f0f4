// Package pruneguest is `lockstep prune`'s two ends: [Host] prunes each
// exercise of a key in a fresh throwaway guest, whose job is the role
// [GuestRole], and copies what it wrote into the output directory; [Guest]
// prunes on the running kernel (pruner/prune), in that guest or on a
// machine declared disposable. The pruner itself never boots a guest: this
// package is where a prune and the harness meet. See docs/prune.md.
package pruneguest
