package recorder

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

// The plain-text forms below are what `lockstep record check` and `record
// diff` print.

// WriteText writes a check's result: each recorded call now refused with
// its audit records, what was not checked, and the verdict; the reasons
// behind a failed check go to warn.
func (res *CheckResult) WriteText(w, warn io.Writer) {
	for _, r := range res.Regressions {
		fmt.Fprintf(w, "refused %s %s (%s)\n  line: %s\n", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","), r.Line)
		for _, a := range r.Audit {
			fmt.Fprintf(w, "  kernel record: %s\n", a)
		}
	}
	for _, u := range res.Unchecked {
		fmt.Fprintf(w, "not checked: %s\n", u)
	}
	for _, why := range res.Why {
		fmt.Fprintf(warn, "lockstep record: %s\n", why)
	}
	if res.Status == StatusOK {
		fmt.Fprintf(w, "check passed: the session ran to its end under the policy, no recorded call refused\n")
	}
}

// WriteText writes the comparison of the policy file with the sessions:
// a line per row it lacks, grants unused and rows an ancestor covers, then
// the counts.
func (d *DiffResult) WriteText(w io.Writer, file string) {
	for _, l := range d.Lacks {
		fmt.Fprintf(w, "lacks   %s\n", l)
	}
	for _, u := range d.Unused {
		fmt.Fprintf(w, "unused  %s\n", u)
	}
	for _, c := range d.Covered {
		fmt.Fprintf(w, "covered %s\n", c)
	}
	fmt.Fprintf(w, "%s: %d lacking, %d unused, %d covered by an ancestor\n", file, len(d.Lacks), len(d.Unused), len(d.Covered))
}

// WriteText writes how a recorded session ended: the session kept and what
// it used, or why it failed (on warn).
func (res *RunResult) WriteText(w, warn io.Writer) {
	if res.Status == StatusOK {
		fmt.Fprintf(w, "recorded %s: status %d, %s used, %.1f s (the program ran unsandboxed, in the guest)\n",
			res.Session, res.Record.Status, cli.Plural(len(res.Record.Uses), "call"), res.Record.Seconds)
		return
	}
	if res.Session != "" {
		fmt.Fprintf(w, "kept %s (failed)\n", res.Session)
	}
	fmt.Fprintf(warn, "lockstep record: %s\n", res.Reason)
}

// WriteText writes what Generate wrote to file, the policy, and why a row
// is not what the sessions alone show (on warn).
func (g *Generated) WriteText(w, warn io.Writer, file string) {
	r := g.Record
	fmt.Fprintf(w, "%s: %s from %s, %s (the recorded program ran unsandboxed, in the guest)\n",
		file, cli.Plural(len(r.Grants), "row"), cli.Plural(len(r.Sessions), "session"), r.PolicyHash)
	for _, why := range r.Why {
		fmt.Fprintf(warn, "lockstep record: %s\n", why)
	}
}
