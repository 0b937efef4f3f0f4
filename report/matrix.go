package report

import (
	"fmt"

	"strings"

	"github.com/lockstep-sandbox/lockstep/verify"
)

// VerifyMatrix renders the kernel matrix: bases down, kernels across, each
// cell the worst verdict of the base's exercises on that kernel (a leg that
// left no result is grey), then a section per exercise cell as Verify shows
// it, and each guest's timings.
func VerifyMatrix(m *verify.Matrix, meta Meta) ([]byte, error) {
	return Render(VerifyMatrixPage(m, meta))
}

// VerifyMatrixPage builds the page VerifyMatrix renders.
func VerifyMatrixPage(m *verify.Matrix, meta Meta) *Page {
	p := &Page{Title: or(meta.Title, "lockstep kernel matrix"), Generated: meta.Started}
	counts := map[string]int{}
	mx := &Matrix{Corner: "base \\ kernel", Columns: m.Kernels}
	for b, base := range m.Bases {
		row := MatrixRow{Name: base}
		for k := range m.Kernels {
			c := m.Cell(b, k)
			counts[c.Verdict]++
			cell := Cell{Verdict: c.Verdict, Text: c.CellText()}
			if c.Verdict == verify.Missing {
				cell.Verdict = "none"
				row.Cells = append(row.Cells, cell)
				continue
			}
			cell.Anchor = fmt.Sprintf("leg-%d-%d-0", b, k)
			row.Cells = append(row.Cells, cell)
			for e, x := range c.Result.Cells {
				s := cellSection(x, fmt.Sprintf("leg-%d-%d-%d", b, k, e))
				s.Title = base + ": " + s.Title
				p.Sections = append(p.Sections, s)
				if g := x.Guest; g != nil {
					p.Timings = append(p.Timings, Timing{Label: base + " × " + shorten(c.Kernel, 12), Phases: []Phase{
						{"boot", (g.Timings.Accel + g.Timings.Initramfs + g.Timings.Boot).Seconds()},
						{"runs", g.Timings.Job.Seconds()}, {"teardown", g.Timings.Shutdown.Seconds()}}})
				}
			}
		}
		mx.Rows = append(mx.Rows, row)
	}
	p.Matrix = mx
	p.Headline = fmt.Sprintf("%d base(s) × %d kernel(s): %d pass, %d fail, %d indeterminate, %d inconclusive, %d missing.",
		len(m.Bases), len(m.Kernels), counts[verify.Pass], counts[verify.Fail], counts[verify.Indeterminate], counts[verify.Inconclusive], counts[verify.Missing])
	p.Verdict = verifyVerdict(m.Status, counts)
	for b, base := range m.Bases {
		for k := range m.Kernels {
			if r := m.Cell(b, k).Result; r != nil {
				p.Provenance = append(p.Provenance, KV{base + " × " + m.Kernels[k], fmt.Sprintf("policy hash %s (%s)", r.PolicyHash, strings.Join(r.Policies, " + "))})
			}
		}
	}
	return p
}
