package enforcer

import (
	"fmt"
	"os"
	"strings"
)

// Verb is lockstep's verb that runs a command under a policy: the command
// line every other part of lockstep builds to apply a policy file starts
// with it.
const Verb = "run"

// Prefix is the argv that starts exe's Verb quietly (-q: the command's
// stderr carries no status line of the enforcer's) for measuring what
// Landlock refuses: --without the MeasureWithout layers (on a read-only
// mount the kernel refuses a write before Landlock is asked, so neither
// its EACCES nor its audit record would be seen), with --log-subprocesses
// when logSubprocesses (the kernel then audits denials after the exec too;
// Landlock ABI 7+). It is what the observer, evidence/contain and
// pruner/prune take as their Enforcer; Command completes it. A run that
// is to be as isolated as a user's takes EnforcePrefix.
func Prefix(exe string, logSubprocesses bool) []string {
	argv := append([]string{exe, Verb, "-q"}, MeasureArgs()...)
	if logSubprocesses {
		argv = append(argv, "--log-subprocesses")
	}
	return argv
}

// Command is the command line that runs what follows it under the policy
// file cfg: prefix (Prefix's, or a library user's own enforcer), then
// "--config", cfg, "--". It is the one place lockstep spells that tail; the
// result is a new slice, so prefix is never written to.
func Command(prefix []string, cfg string) []string {
	return append(append(make([]string, 0, len(prefix)+3), prefix...), "--config", cfg, "--")
}

// MeasureArgs are the flags of Verb that switch off the MeasureWithout
// layers, for a prefix that measures Landlock's own refusals.
func MeasureArgs() []string {
	return []string{"--without", strings.Join(MeasureWithout, ",")}
}

// EnforcePrefix is the argv that starts exe's Verb quietly with every
// isolation layer, as a user's `lockstep run` has them: what verify's
// joint runs use, to see the exercises pass under the real enforcer.
func EnforcePrefix(exe string) []string {
	return []string{exe, Verb, "-q"}
}

// SelfMeasureArgv is this executable's own enforcer as a prefix that
// measures Landlock's own refusals: its Verb with MeasureArgs, without the
// isolation layers that hide them.
func SelfMeasureArgv() ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable for the enforcer: %w", err)
	}
	return append([]string{self, Verb}, MeasureArgs()...), nil
}
