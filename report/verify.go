package report

import (
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// Verify renders a verify result: the kernels × exercises matrix in colour,
// a section per cell (its refused calls beside their audit records, the
// rows that would grant them, the joint runs and containment checks), each
// guest's timings and the provenance.
func Verify(res *verify.Result, m Meta) ([]byte, error) {
	return Render(VerifyPage(res, m))
}

// VerifyPage builds the page Verify renders.
func VerifyPage(res *verify.Result, m Meta) *Page {
	p := &Page{Title: or(m.Title, "lockstep verify: "+res.Key), Generated: m.Started}
	counts := map[string]int{}
	for _, c := range res.Cells {
		counts[c.Verdict]++
	}
	p.Headline = fmt.Sprintf("%d kernel(s) × %d exercise(s): %d pass, %d fail, %d indeterminate, %d inconclusive.",
		len(res.Kernels), len(res.Exercises), counts[verify.Pass], counts[verify.Fail], counts[verify.Indeterminate], counts[verify.Inconclusive])
	p.Verdict = verifyVerdict(res.Status, counts)
	mx := &Matrix{Corner: "kernel \\ exercise", Columns: res.Exercises}
	for ki, k := range res.Kernels {
		abi := k.ABI
		for ei := range res.Exercises {
			if c := res.Cell(ki, ei); abi == 0 && c.ABI > 0 {
				abi = c.ABI
			}
		}
		row := MatrixRow{Name: fmt.Sprintf("%s (ABI %d)", shorten(k.Name, 40), abi)}
		for ei := range res.Exercises {
			c := res.Cell(ki, ei)
			id := fmt.Sprintf("cell-%d-%d", ki, ei)
			text := c.Verdict
			if c.Diagnosis != nil && len(c.Diagnosis.Refusals) > 0 {
				text = fmt.Sprintf("%s: %d refused", c.Verdict, len(c.Diagnosis.Refusals))
			}
			row.Cells = append(row.Cells, Cell{Verdict: c.Verdict, Text: text, Anchor: id})
			p.Sections = append(p.Sections, cellSection(c, id))
			if g := c.Guest; g != nil {
				p.Timings = append(p.Timings, Timing{Label: shorten(k.Name, 14) + " × " + c.Exercise, Phases: []Phase{
					{"boot", (g.Timings.Accel + g.Timings.Initramfs + g.Timings.Boot).Seconds()},
					{"runs", g.Timings.Job.Seconds()}, {"teardown", g.Timings.Shutdown.Seconds()}}})
			}
		}
		mx.Rows = append(mx.Rows, row)
	}
	p.Matrix = mx
	p.Provenance = []KV{{"key", res.Key}, {"policy", strings.Join(res.Policies, " + ")}, {"policy hash", res.PolicyHash}}
	for ki, k := range res.Kernels {
		kv := KV{k.Name, k.BzImage}
		if len(res.Exercises) > 0 {
			if g := res.Cell(ki, 0).Guest; g != nil {
				kv.Value = fmt.Sprintf("bzImage sha256 %s; %s%s, %d vCPU, %d MiB, QEMU %s", g.BzImageSHA256, g.Accel, cpuModel(g.CPU), g.VCPUs, g.MemMB, g.QEMUVersion)
			}
			if n := engine.FactorNote(res.Cell(ki, 0).TimeFactor); n != "" {
				kv.Value += "; " + n
			}
		}
		p.Provenance = append(p.Provenance, kv)
	}
	par := "as many as the host's CPUs allow"
	if res.Parallel > 0 {
		par = fmt.Sprint(res.Parallel)
	}
	p.Provenance = append(p.Provenance, KV{"wall time", fmt.Sprintf("%.1f s (the guests' own: %.1f s; parallel: %s)", res.WallSeconds, res.GuestSeconds, par)})
	return p
}

// verifyVerdict is the page's verdict from the status and the count of
// cells per verdict.
func verifyVerdict(status int, counts map[string]int) string {
	switch {
	case status == verify.StatusPass:
		return Pass
	case status == verify.StatusFail:
		return Fail
	case counts[verify.Indeterminate] == 0 && counts[verify.Inconclusive] > 0:
		// Every cell that did not pass ran out of time.
		return Inconclusive
	}
	return Indeterminate
}

func cellSection(c *verify.Cell, id string) Section {
	s := Section{ID: id, Title: fmt.Sprintf("%s × %s", c.Kernel, c.Exercise), Verdict: c.Verdict}
	if c.Release != "" {
		s.Notes = append(s.Notes, fmt.Sprintf("kernel %s, Landlock ABI %d", c.Release, c.ABI))
	}
	if c.Why != "" {
		s.Notes = append(s.Notes, c.Why)
	}
	if c.Reference != "" {
		s.Notes = append(s.Notes, "reference: "+c.Reference)
	}
	for i, j := range c.Joint {
		v := Pass
		switch {
		case j.TimedOut:
			v = Inconclusive
		case !j.Agrees:
			v = Fail
		}
		s.Checks = append(s.Checks, Check{Name: fmt.Sprintf("joint run %d", i+1), Verdict: v, Detail: fmt.Sprintf("%s (status %d, %.1f s)", j.Verdict, j.Status, j.Seconds)})
	}
	for _, r := range c.Unenforceable {
		s.Checks = append(s.Checks, Check{Name: r.Rule, Verdict: Fail, Detail: fmt.Sprintf("needs Landlock ABI %d (%s)", r.NeedABI, r.Why)})
	}
	if o := c.Diagnosis; o != nil {
		for i := range o.Refusals {
			s.Pairs = append(s.Pairs, refusalPair(o, &o.Refusals[i]))
			s.Rows = appendNew(s.Rows, o.Refusals[i].Grant...)
		}
		for _, a := range o.AuditOnly {
			s.Pairs = append(s.Pairs, Pair{Side: o.Kernel, Audit: []string{a}, Kind: "audit-only"})
		}
	}
	for _, ch := range c.Containment {
		v := Pass
		switch {
		case ch.Skipped:
			v = "none"
		case !ch.Held:
			v = Fail
		}
		s.Checks = append(s.Checks, Check{Name: "containment: " + ch.Name, Verdict: v, Detail: ch.Detail})
	}
	return s
}
