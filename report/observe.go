package report

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/pruner/record"
)

// Observe renders a `lockstep observe` run: one matrix row for the kernel,
// a column per exercise, and per exercise the cross-check as its record
// keeps it (the matched count, each strace refusal no record agreed with,
// each record no refusal took), the ABI-10 rows with the audit records
// behind them, the containment checks, the guest's timings and the
// provenance. pathSets is where Observe unpacked the .abi10.json records.
func Observe(res *observer.HostResult, key, pathSets string, m Meta) ([]byte, error) {
	return Render(ObservePage(res, key, pathSets, m))
}

// ObservePage builds the page Observe renders.
func ObservePage(res *observer.HostResult, key, pathSets string, m Meta) *Page {
	p := &Page{Title: or(m.Title, "lockstep observe: "+key), Generated: m.Started}
	switch res.Status {
	case observer.StatusVerified:
		p.Verdict, p.Headline = Pass, "Every exercise verified."
	case observer.StatusFailed:
		p.Verdict, p.Headline = Fail, "An exercise failed."
	default:
		p.Verdict, p.Headline = Indeterminate, "Indeterminate: "+res.Reason
	}
	kernelName := "guest"
	if r := res.Run; r != nil && r.KernelRelease != "" {
		kernelName = r.KernelRelease
	}
	row := MatrixRow{Name: kernelName}
	mx := &Matrix{Corner: "kernel \\ exercise"}
	var exs []observer.ExerciseSummary
	if res.Summary != nil {
		exs = res.Summary.Exercises
	}
	for _, e := range exs {
		id := "ex-" + e.Exercise
		mx.Columns = append(mx.Columns, e.Exercise)
		c := Cell{Verdict: Pass, Text: "pass", Anchor: id}
		switch {
		case e.Inconclusive:
			c = Cell{Verdict: Indeterminate, Text: "inconclusive", Anchor: id}
		case !e.Verified:
			c = Cell{Verdict: Fail, Text: "fail", Anchor: id}
		}
		row.Cells = append(row.Cells, c)
		p.Sections = append(p.Sections, observeSection(e, key, pathSets, id, c.Verdict))
	}
	if len(exs) == 0 {
		mx.Columns = []string{key}
		row.Cells = []Cell{{Verdict: p.Verdict, Text: p.Verdict}}
	}
	mx.Rows = []MatrixRow{row}
	p.Matrix = mx
	if r := res.Run; r != nil {
		p.Timings = []Timing{{Label: kernelName, Phases: []Phase{{"boot", (r.Timings.Accel + r.Timings.Initramfs + r.Timings.Boot).Seconds()},
			{"runs", r.Timings.Job.Seconds()}, {"teardown", r.Timings.Shutdown.Seconds()}}}}
		p.Provenance = []KV{{"kernel release", r.KernelRelease}, {"bzImage sha256", r.KernelSHA256},
			{"initramfs sha256", r.InitramfsSHA256}, {"accel", fmt.Sprintf("%s (%s), %d vCPU, %d MiB", r.Accel, r.AccelReason, r.CPUs, r.MemMB)},
			{"QEMU", r.QEMUVersion}}
	}
	p.Provenance = append(p.Provenance, KV{"artefacts (beside run.json)", strings.Join(
		[]string{observer.ConsoleFile, observer.AuditRawFile, observer.KernelConfigFile}, ", ")})
	if s := res.Summary; s != nil {
		p.Provenance = append(p.Provenance, KV{"audit", fmt.Sprintf("received %d, lost %d (before %d), backlog %d of %d",
			s.Audit.Received, s.Audit.Lost, s.Audit.LostBefore, s.Audit.Backlog, s.Audit.BacklogLimit)})
		if s.Proof != nil {
			p.Provenance = append(p.Provenance, KV{"kernel proof", s.Proof.Summary()})
		}
	}
	return p
}

func observeSection(e observer.ExerciseSummary, key, pathSets, id, verdict string) Section {
	s := Section{ID: id, Title: e.Exercise, Verdict: verdict}
	if e.Reason != "" {
		s.Notes = append(s.Notes, e.Reason)
	}
	for _, c := range e.Containment {
		v := Pass
		switch {
		case c.Skipped:
			v = "none"
		case !c.Held:
			v = Fail
		}
		s.Checks = append(s.Checks, Check{Name: "containment: " + c.Name, Verdict: v, Detail: c.Detail})
	}
	k, err := record.ReadKVM(filepath.Join(pathSets, key+"_"+e.Exercise+".abi10.json"))
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("no record: %v", err))
		return s
	}
	if cc := k.CrossCheck; cc != nil {
		matched := cc.StraceDenials - len(cc.Mismatches)
		s.Notes = append(s.Notes, fmt.Sprintf("cross-check: %d strace refusal(s), %d audit record(s); %d matched one for one",
			cc.StraceDenials, cc.AuditRecords, matched))
		if matched > 0 {
			s.Pairs = append(s.Pairs, Pair{Side: k.Kernel, Strace: fmt.Sprintf("%d refusal(s)", matched),
				Audit: []string{fmt.Sprintf("%d record(s), joined on pid + syscall, then object + rights", matched)}, Kind: "matched"})
		}
	}
	for _, mm := range k.Mismatches {
		s.Pairs = append(s.Pairs, Pair{Side: k.Kernel, Strace: fmt.Sprintf("%s %s [%s]", mm.Operation, strings.Join(mm.Objects, " "),
			strings.Join(mm.Sections, ",")), Kind: "strace-only", Note: fmt.Sprintf("records for the object: %v", mm.AuditForObject)})
	}
	for _, a := range k.AuditOnly {
		s.Pairs = append(s.Pairs, Pair{Side: k.Kernel, Audit: []string{fmt.Sprintf("%s [%s]", strings.Join(a.Objects, " "),
			strings.Join(a.Sections, ","))}, Kind: "audit-only"})
	}
	for _, r := range k.Rows {
		s.Rows = append(s.Rows, r.Rule)
		s.Pairs = append(s.Pairs, Pair{Side: k.Kernel, Strace: "refused UDP bind → " + r.Rule, Audit: r.Audit, Kind: "matched"})
	}
	return s
}

// ObserveDir renders the report of an observe run after the fact, from the
// run.json, observe.json and .abi10.json files `lockstep observe` left in
// pathSets.
func ObserveDir(pathSets string, m Meta) ([]byte, error) {
	var run observer.RunJSON
	if err := readJSON(filepath.Join(pathSets, "run.json"), &run); err != nil {
		return nil, err
	}
	res := &observer.HostResult{Status: run.Status, Reason: run.Reason, Run: &harness.Result{Status: run.Status,
		Accel: run.Accel, AccelReason: run.AccelReason, CPUs: run.VCPUs, MemMB: run.MemMB, QEMUVersion: run.QEMUVersion,
		KernelRelease: run.KernelRelease, KernelSHA256: run.BzImageSHA256, InitramfsSHA256: run.InitramfsSHA256, Timings: run.Timings}}
	var sum observer.Summary
	if err := readJSON(filepath.Join(pathSets, observer.SummaryFile), &sum); err == nil {
		res.Summary = &sum
	}
	page := ObservePage(res, run.Key, pathSets, m)
	if run.KernelPin != "" {
		page.Provenance = append([]KV{{"pin", run.KernelPin}, {"config sha256", run.ConfigSHA256}}, page.Provenance...)
	}
	return Render(page)
}

func readJSON(path string, v any) error {
	b, err := safefile.ReadFile(path, 0)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	return nil
}
