// Package contain proves the forbidden direction of a pruned policy: under
// the final policy a probe
// must be refused reading each canary file, writing into a path the policy
// grants only [read], connecting to a loopback port no rule names, binding a
// port no rule names, and going past each limit it can reach.
//
// The probe is lockstep itself (ProbeMain, the hidden verb
// `lockstep contain-probe <op> <args>`), so no extra binary has to be in the
// image: it prints "START", then one "OP <name> ret=<n> errno=<E>" line.
// Each check that has a control first runs the probe without any sandbox,
// where it must succeed; only then does a refusal under the policy count
// (a check whose control fails is unproven, and the prune aborts, as it does
// for a check the probe passes). Timeout and CPU checks have no control:
// their refusal is the enforcer's exit status (124; 137 or 152).
//
// The canaries are named by templates (DefaultCanaries), which the checks
// and the records keep; each run plants its own file for each in a
// directory of a unique name beside the template's place and removes it
// afterwards, so runs beside one another on one machine share none.
//
// No check sends traffic anywhere but loopback: the connect check uses a
// port the pruner itself listens on at 127.0.0.1, so the control connects
// and the sandboxed probe must get EACCES.
//
// Checks that cannot run are recorded as unchecked with the reason: a limit
// the policy does not set, a limit beyond the probe's caps (nofile ≥ 4000,
// nproc ≥ 600, mem_mb ≥ 20000, fsize_mb ≥ 600, timeout or cpu ≥ MaxSeconds),
// no read-only file to try a write
// on, a policy that lets every loopback port be connected to.
package contain
