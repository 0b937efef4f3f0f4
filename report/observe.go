package report

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
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
	p.Verdict, p.Headline = observeVerdict(res)
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
			c = Cell{Verdict: Inconclusive, Text: "inconclusive", Anchor: id}
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
			{"initramfs sha256", r.InitramfsSHA256}, {"accel", fmt.Sprintf("%s (%s), -cpu %s, %d vCPU, %d MiB", r.Accel, r.AccelReason, r.CPU, r.CPUs, r.MemMB)},
			{"QEMU", r.QEMUVersion}}
	}
	p.Artefacts = artefactLinks(pathSets, m.Dir)
	if s := res.Summary; s != nil {
		p.Provenance = append(p.Provenance, KV{"audit", fmt.Sprintf("received %d, lost %d (before %d), backlog %d of %d",
			s.Audit.Received, s.Audit.Lost, s.Audit.LostBefore, s.Audit.Backlog, s.Audit.BacklogLimit)})
		if s.Proof != nil {
			p.Provenance = append(p.Provenance, KV{"kernel proof", s.Proof.Summary()})
		}
		if n := engine.FactorNote(s.TimeFactor); n != "" {
			p.Provenance = append(p.Provenance, KV{"time factor", n + " (the exercise runs'; the containment checks keep the policy's own)"})
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
	k, err := kvmrecord.Read(filepath.Join(pathSets, key+"_"+e.Exercise+".abi10.json"))
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("no record: %v", err))
		return s
	}
	if cc := k.CrossCheck; cc != nil {
		matched := cc.StraceDenials - len(cc.Mismatches)
		s.Notes = append(s.Notes, fmt.Sprintf("cross-check: %d strace refusal(s), %d audit record(s); %d matched one for one",
			cc.StraceDenials, cc.AuditRecords, matched))
		for _, r := range e.Matched {
			s.Pairs = append(s.Pairs, Pair{Side: k.Kernel, Strace: matchedRefusal(r), Audit: r.Audit, Kind: "matched"})
		}
		// An observe.json from before the pairs were kept has only the
		// record's count.
		if matched > 0 && len(e.Matched) == 0 {
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
		Accel: run.Accel, AccelReason: run.AccelReason, CPU: run.CPU, CPUs: run.VCPUs, MemMB: run.MemMB, QEMUVersion: run.QEMUVersion,
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

// observeVerdict is the page's verdict and headline.
func observeVerdict(res *observer.HostResult) (string, string) {
	switch {
	case res.Status == observer.StatusVerified:
		return Pass, "Every exercise verified."
	case res.Status == observer.StatusFailed:
		return Fail, "An exercise failed."
	case res.Status == observer.StatusIndeterminate && onlyInconclusive(res):
		return Inconclusive, "Inconclusive: a run ran out of time before anything was found."
	}
	return Indeterminate, "Indeterminate: " + res.Reason
}

// matchedRefusal is a matched refusal's strace side: its trace line with
// the line number, else the call, objects and rights.
func matchedRefusal(r engine.Refusal) string {
	if r.Line != "" {
		return fmt.Sprintf("%d: %s", r.Number, r.Line)
	}
	return fmt.Sprintf("%s %s [%s]", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","))
}

// onlyInconclusive reports whether every exercise that was not verified
// ran out of time, with at least one such (a failed kernel proof observes
// no exercise): the run found nothing, nor failed to look.
func onlyInconclusive(res *observer.HostResult) bool {
	if res.Summary == nil {
		return false
	}
	n := 0
	for _, e := range res.Summary.Exercises {
		switch {
		case e.Inconclusive:
			n++
		case !e.Verified:
			return false
		}
	}
	return n > 0
}

// artefactLinks link the guest run's artefacts present in pathSets,
// relative to dir (the page's directory) when given.
func artefactLinks(pathSets, dir string) []Link {
	var links []Link
	for _, n := range []string{observer.ConsoleFile, observer.AuditRawFile, observer.KernelConfigFile} {
		path := filepath.Join(pathSets, n)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		href, err := filepath.Abs(path)
		if err != nil {
			continue
		}
		if dir != "" {
			if d, err := filepath.Abs(dir); err == nil {
				if rel, err := filepath.Rel(d, href); err == nil {
					href = rel
				}
			}
		}
		links = append(links, Link{Name: n, Href: (&url.URL{Path: filepath.ToSlash(href)}).String()})
	}
	return links
}
