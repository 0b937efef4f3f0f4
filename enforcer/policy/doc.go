// Package policy is the grammar of lockstep's policy files (Phobos's .cfg
// format): parsing with every problem reported at once, canonical rendering,
// hashing, and the set operations the pruner and orchestrator use.
//
// Parsing and rendering never consult the running system, so a policy hashes
// the same everywhere; kernel-dependent decisions belong to package enforcer.
package policy
