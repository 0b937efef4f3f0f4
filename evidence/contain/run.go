package contain

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lockstep-sandbox/lockstep/record"
)

// Probe runs the probe with c.Args, under the policy when sandboxed (with
// its timeout off when c.WithoutTimeout), and returns its exit status and
// stdout.
type Probe func(ctx context.Context, sandboxed bool, c Check) (status int, stdout []byte, err error)

// ProbeOutput is the probe's parsed stdout.
type ProbeOutput struct {
	Started bool
	// Errno is the last OP line's errno ("0" on success, "" when none).
	Errno string
	Line  string
}

// ParseOutput reads the probe's stdout.
func ParseOutput(b []byte) ProbeOutput {
	var o ProbeOutput
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "START":
			o.Started = true
		case strings.HasPrefix(l, "OP "):
			o.Line = l
			if i := strings.LastIndex(l, " errno="); i >= 0 {
				o.Errno = l[i+len(" errno="):]
			}
		}
	}
	return o
}

// ParseOps reads a batch probe's stdout (Batch): whether it started, and
// each OP line's outcome in order, one per operation it got to.
func ParseOps(b []byte) (started bool, ops []ProbeOutput) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "START":
			started = true
		case strings.HasPrefix(l, "OP "):
			ops = append(ops, ParseOutput([]byte("START\n"+l)))
		}
	}
	return started, ops
}

// Run runs every check. It returns the record's checks (unchecked ones
// appended, sorted by name) and the names of the checks that did not hold
// (the probe was not refused, or its control failed). The error is for a
// probe that could not run at all.
//
// The checks that wait a limit out (timeout, cpu: no control, refused by
// the enforcer's status) run beside the others, each in its own goroutine:
// they cost their limit's seconds each (60 s and 30 s for the floors every
// pruned policy has), and one after another they were most of a prune's
// containment stage. Every probe is its own process under its own copy of
// the policy, so running them at once changes no result. The checks that
// read an errno (batchable) run as two probe processes, every control in
// one and every try under the policy in another (runBatch): a probe
// process is a start of the lockstep binary, and under the enforcer three
// (its own, the re-executed child's, the probe's), which is most of a
// check's cost in a guest under TCG.
func Run(ctx context.Context, checks []Check, un []record.ContainmentCheck, probe Probe) ([]record.ContainmentCheck, []string, error) {
	results := make([]checkResult, len(checks))
	var wg sync.WaitGroup
	var batch []int
	for i, c := range checks {
		switch {
		case waitsOut(c):
			wg.Go(func() { results[i].rc, results[i].failed, results[i].err = runCheck(ctx, c, probe) })
		case batchable(c):
			batch = append(batch, i)
		}
	}
	for i, c := range checks {
		if !waitsOut(c) && !batchable(c) {
			results[i].rc, results[i].failed, results[i].err = runCheck(ctx, c, probe)
		}
	}
	batchErr := runBatch(ctx, checks, batch, probe, results)
	wg.Wait()
	if batchErr != nil {
		return nil, nil, batchErr
	}
	var out []record.ContainmentCheck
	var failed []string
	for _, r := range results {
		if r.err != nil {
			return nil, nil, r.err
		}
		out = append(out, r.rc)
		if r.failed != "" {
			failed = append(failed, r.failed)
		}
	}
	out = append(out, un...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, failed, nil
}

// checkResult is one check's outcome in Run.
type checkResult struct {
	rc     record.ContainmentCheck
	failed string
	err    error
}

// batchable reports whether c reads only the errno of an operation that
// returns, so it can share a probe process with others: not a check by
// status (nproc's 137, the waits), not one run without the timeout.
func batchable(c Check) bool {
	if c.WantErrno == "" || len(c.WantStatus) > 0 || c.WithoutTimeout || len(c.Args) == 0 {
		return false
	}
	switch c.Args[0] {
	case "read", "write", "create", "connect", "bind", "nofile", "mem", "fsize":
		return true
	}
	return false
}

// runBatch runs the checks at idx as runCheck would, in two probe
// processes: the controls together without any sandbox, then, under the
// policy, every check whose control held (or that has none). Each
// operation's outcome is its own OP line; the status a message names is
// the one a probe of that operation alone exits with (0 done, 1 refused),
// or the batch's when the probe ended before it.
func runBatch(ctx context.Context, checks []Check, idx []int, probe Probe, results []checkResult) error {
	var controls, tries []int
	for _, i := range idx {
		results[i].rc = record.ContainmentCheck{Name: checks[i].Name, Arguments: checks[i].Args}
		if checks[i].Control {
			controls = append(controls, i)
		} else {
			tries = append(tries, i)
		}
	}
	if len(controls) > 0 {
		st, _, ops, _, err := runOps(ctx, false, checks, controls, probe)
		if err != nil {
			return fmt.Errorf("containment controls: %w", err)
		}
		for k, i := range controls {
			rc := &results[i].rc
			if k >= len(ops) || ops[k].Errno != "0" {
				line := ""
				if k < len(ops) {
					st, line = opStatus(ops[k]), ops[k].Line
				}
				rc.Control = fmt.Sprintf("failed: status %d, %s", st, strings.TrimSpace(line))
				rc.Unchecked = "unproven: the probe fails without any sandbox too"
				results[i].failed = checks[i].Name + " (unproven)"
				continue
			}
			rc.Control = "ok: " + ops[k].Line
			tries = append(tries, i)
		}
	}
	if len(tries) == 0 {
		return nil
	}
	sort.Ints(tries)
	st, started, ops, out, err := runOps(ctx, true, checks, tries, probe)
	if err != nil {
		return err
	}
	if !started {
		return fmt.Errorf("%s: the probe did not start under the policy (status %d): %s", checkNames(checks, tries), st, bytes.TrimSpace(out))
	}
	for k, i := range tries {
		c, rc := checks[i], &results[i].rc
		var po ProbeOutput
		ost := st
		if k < len(ops) {
			po, ost = ops[k], opStatus(ops[k])
		}
		rc.Refused = po.Errno == c.WantErrno
		if !rc.Refused {
			results[i].failed = fmt.Sprintf("%s (status %d, %s)", c.Name, ost, strings.TrimSpace(po.Line))
		}
	}
	return nil
}

// runOps runs the operations of checks at idx in one probe process and
// returns its status, whether it started, each operation's outcome in
// order, and its output.
func runOps(ctx context.Context, sandboxed bool, checks []Check, idx []int, probe Probe) (int, bool, []ProbeOutput, []byte, error) {
	var args [][]string
	for _, i := range idx {
		args = append(args, checks[i].Args)
	}
	st, out, err := probe(ctx, sandboxed, Check{Name: checkNames(checks, idx), Args: Batch(args...)})
	if err != nil {
		return 0, false, nil, nil, err
	}
	started, ops := ParseOps(out)
	return st, started, ops, out, nil
}

// opStatus is the status a probe of one operation exits with.
func opStatus(po ProbeOutput) int {
	if po.Errno == "0" {
		return 0
	}
	return 1
}

func checkNames(checks []Check, idx []int) string {
	var n []string
	for _, i := range idx {
		n = append(n, checks[i].Name)
	}
	return strings.Join(n, ", ")
}

// waitsOut reports whether c waits a limit out (refused by status alone).
func waitsOut(c Check) bool { return !c.Control && len(c.WantStatus) > 0 }

// runCheck runs c's control (if any) and c under the policy. It returns the
// record's check and, when it did not hold, why.
func runCheck(ctx context.Context, c Check, probe Probe) (record.ContainmentCheck, string, error) {
	rc := record.ContainmentCheck{Name: c.Name, Arguments: c.Args}
	if c.Control {
		st, b, err := probe(ctx, false, c)
		if err != nil {
			return rc, "", fmt.Errorf("%s: control: %w", c.Name, err)
		}
		po := ParseOutput(b)
		if !po.Started || st != 0 || po.Errno != "0" {
			rc.Control = fmt.Sprintf("failed: status %d, %s", st, strings.TrimSpace(po.Line))
			rc.Unchecked = "unproven: the probe fails without any sandbox too"
			return rc, c.Name + " (unproven)", nil
		}
		rc.Control = "ok: " + po.Line
	}
	st, b, err := probe(ctx, true, c)
	if err != nil {
		return rc, "", fmt.Errorf("%s: %w", c.Name, err)
	}
	po := ParseOutput(b)
	if !po.Started {
		return rc, "", fmt.Errorf("%s: the probe did not start under the policy (status %d): %s", c.Name, st, bytes.TrimSpace(b))
	}
	if c.WantErrno != "" {
		rc.Refused = po.Errno == c.WantErrno
	}
	for _, s := range c.WantStatus {
		if st == s {
			rc.Refused = true
		}
	}
	if !rc.Refused {
		return rc, fmt.Sprintf("%s (status %d, %s)", c.Name, st, strings.TrimSpace(po.Line)), nil
	}
	return rc, "", nil
}
