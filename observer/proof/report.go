package proof

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Outcome is a check's verdict.
type Outcome string

// The outcomes of a check.
const (
	Held          Outcome = "held"
	Failed        Outcome = "failed"
	Indeterminate Outcome = "indeterminate"
	// NotOffered marks a right class the running kernel's ABI lacks: nothing
	// was tried.
	NotOffered Outcome = "not offered"
)

// Schema is the version of the Report JSON document.
const Schema = 1

// Check is one line of the proof.
type Check struct {
	// Name is "release", "lsm", "abi", "audit", or a right class
	// (Refusal.Name: read_file, scope.signal, …).
	Name string `json:"name"`
	// Blocker is the record's blocker a refusal must name (a landlock.Right).
	Blocker string  `json:"blocker,omitempty"`
	Outcome Outcome `json:"outcome"`
	// Detail says what was found; for a failure, also what was wanted.
	Detail string `json:"detail"`
	// Evidence holds the records behind a refusal's verdict, one
	// "<type> <netlink body>" line each.
	Evidence []string `json:"evidence,omitempty"`
	// Gate marks a check whose failure leaves nothing observable, which
	// makes the whole proof indeterminate (status 3), never a mere failure.
	Gate bool `json:"gate,omitempty"`
}

// AuditCounters are the kernel's audit figures at the end of the proof.
type AuditCounters struct {
	Received     uint64 `json:"received"`
	Lost         uint32 `json:"lost"`
	BacklogLimit uint32 `json:"backlog_limit"`
	RateLimit    uint32 `json:"rate_limit"`
}

// Report is the proof's result: `lockstep selftest --json` prints it and the
// guest writes it to selftest.json among its results.
type Report struct {
	Schema      int            `json:"schema"`
	Release     string         `json:"release"`
	WantRelease string         `json:"want_release,omitempty"`
	ABI         int            `json:"abi"`
	WantABI     int            `json:"want_abi"`
	Errata      int            `json:"errata"`
	Audit       *AuditCounters `json:"audit,omitempty"`
	Checks      []Check        `json:"checks"`
	// Status is 0 when every check held (or was not offered), 1 when a check
	// failed, 3 when the proof is indeterminate: a gate (LSM list, ABI at
	// least the pin's, audit) failed or a refusal's records were lost.
	Status int `json:"status"`
}

// Statuses of a proof, as `lockstep selftest` exits.
const (
	StatusHeld          = 0
	StatusFailed        = 1
	StatusIndeterminate = 3
)

// Finish computes r.Status from the checks.
func (r *Report) Finish() {
	r.Schema = Schema
	failed, indeterminate := false, false
	for _, c := range r.Checks {
		switch c.Outcome {
		case Failed:
			if c.Gate {
				r.Status = StatusIndeterminate
				return
			}
			failed = true
		case Indeterminate:
			indeterminate = true
		}
	}
	switch {
	case failed:
		r.Status = StatusFailed
	case indeterminate:
		r.Status = StatusIndeterminate
	default:
		r.Status = StatusHeld
	}
}

// Summary is one line naming the status and why.
func (r *Report) Summary() string {
	count := map[Outcome]int{}
	for _, c := range r.Checks {
		count[c.Outcome]++
	}
	s := fmt.Sprintf("%d held, %d failed, %d indeterminate, %d not offered", count[Held], count[Failed], count[Indeterminate], count[NotOffered])
	switch r.Status {
	case StatusHeld:
		return "status 0: the kernel is proven (" + s + ")"
	case StatusFailed:
		return "status 1: a check failed (" + s + ")"
	}
	for _, c := range r.Checks {
		if c.Gate && c.Outcome == Failed {
			return fmt.Sprintf("status 3: indeterminate, %s failed: %s (%s)", c.Name, c.Detail, s)
		}
	}
	return "status 3: indeterminate (" + s + ")"
}

// WriteTable prints the checks as an aligned table and the summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tOUTCOME\tDETAIL")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Outcome, strings.ReplaceAll(c.Detail, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// Write writes the report as `lockstep selftest` prints it: the table, or
// with asJSON the indented JSON document.
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if !asJSON {
		return r.WriteTable(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
