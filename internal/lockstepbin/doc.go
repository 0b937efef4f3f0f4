// Package lockstepbin builds the lockstep command for tests that need the
// real binary: the enforcer's re-executed child, a probe, a guest's PID 1.
package lockstepbin
