package verify

import (
	"fmt"
	"sort"
	"strings"
)

// Missing is the verdict of a planned leg that left no result (its job
// failed before verify wrote one, or never ran). It counts as
// indeterminate in the status: no result is never a pass.
const Missing = "missing"

// MatrixSchema is the version of a Matrix document.
const MatrixSchema = 1

// Leg is one job of the kernel matrix: every exercise of one base on one
// kernel.
type Leg struct {
	Base   string `json:"base"`
	Kernel string `json:"kernel"`
}

// Plan is the kernel matrix's work: the kernels to provide (each once) and
// every base on every kernel, base by base.
type Plan struct {
	Kernels []string `json:"kernels"`
	Legs    []Leg    `json:"legs"`
}

// NewPlan plans every base on every kernel; it refuses an empty axis, which
// would make a matrix nothing runs in.
func NewPlan(bases, kernels []string) (*Plan, error) {
	if len(bases) == 0 || len(kernels) == 0 {
		return nil, fmt.Errorf("verify: a matrix of %d base(s) × %d kernel(s) has no leg; want at least one of each", len(bases), len(kernels))
	}
	p := &Plan{Kernels: kernels}
	for _, b := range bases {
		for _, k := range kernels {
			p.Legs = append(p.Legs, Leg{Base: b, Kernel: k})
		}
	}
	return p, nil
}

// MatrixCell is one base on one kernel: the worst verdict of its exercises'
// cells, and the result those cells came from (nil when Missing).
type MatrixCell struct {
	Base    string `json:"base"`
	Kernel  string `json:"kernel"`
	Verdict string `json:"verdict"`
	// Counts is how many of the base's exercises had each verdict.
	Counts map[string]int `json:"counts,omitempty"`
	Result *Result        `json:"result,omitempty"`
}

// Matrix is the bases × kernels table of a planned matrix, filled from its
// legs' results.
type Matrix struct {
	Schema  int      `json:"schema"`
	Status  int      `json:"status"`
	Bases   []string `json:"bases"`
	Kernels []string `json:"kernels"`
	// Cells are row-major: Cells[b*len(Kernels)+k].
	Cells []*MatrixCell `json:"cells"`
}

// Cell returns the cell of base b and kernel k.
func (m *Matrix) Cell(b, k int) *MatrixCell { return m.Cells[b*len(m.Kernels)+k] }

// NewMatrix lays out plan's bases × kernels and fills each cell from the
// results (each a matrix of one base, the key, on one or more kernels, as
// `verify --base-dir` prints them per base). A cell no result covers is
// Missing. A result for a base or kernel the plan does not hold, or a second
// result for one cell, is refused: the table would not say what ran.
func NewMatrix(plan *Plan, results []*Result) (*Matrix, error) {
	m := &Matrix{Schema: MatrixSchema, Kernels: plan.Kernels}
	bi, ki := map[string]int{}, map[string]int{}
	for i, k := range plan.Kernels {
		ki[k] = i
	}
	for _, l := range plan.Legs {
		if _, ok := bi[l.Base]; !ok {
			bi[l.Base] = len(m.Bases)
			m.Bases = append(m.Bases, l.Base)
		}
	}
	m.Cells = make([]*MatrixCell, len(m.Bases)*len(m.Kernels))
	for b, base := range m.Bases {
		for k, kern := range m.Kernels {
			m.Cells[b*len(m.Kernels)+k] = &MatrixCell{Base: base, Kernel: kern, Verdict: Missing}
		}
	}
	var problems []string
	for _, r := range results {
		for k := range r.Kernels {
			if err := m.fill(bi, ki, r, k); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("verify: the legs' results do not fit the plan:\n  %s", strings.Join(problems, "\n  "))
	}
	m.Status = StatusPass
	for _, c := range m.Cells {
		m.Status = WorseStatus(m.Status, verdictStatus(c.Verdict))
	}
	return m, nil
}

// fill puts kernel k's row of r into its cell.
func (m *Matrix) fill(bi, ki map[string]int, r *Result, k int) error {
	name := r.Kernels[k].Name
	b, okb := bi[r.Key]
	kk, okk := ki[name]
	if !okb || !okk {
		return fmt.Errorf("a result for base %s on kernel %s, which the plan has no leg for", r.Key, name)
	}
	c := m.Cell(b, kk)
	if c.Result != nil {
		return fmt.Errorf("two results for base %s on kernel %s", r.Key, name)
	}
	row := *r
	row.Kernels = r.Kernels[k : k+1]
	row.Cells = r.Cells[k*len(r.Exercises) : (k+1)*len(r.Exercises)]
	row.Status = status(row.Cells)
	c.Result, c.Counts = &row, map[string]int{}
	for _, x := range row.Cells {
		c.Counts[x.Verdict]++
	}
	c.Verdict = worstVerdict(row.Cells)
	return nil
}

// worstVerdict is fail over indeterminate over inconclusive over pass; no
// cell at all is Missing.
func worstVerdict(cells []*Cell) string {
	rank := map[string]int{Pass: 0, Inconclusive: 1, Indeterminate: 2, Fail: 3}
	if len(cells) == 0 {
		return Missing
	}
	v := Pass
	for _, c := range cells {
		r, ok := rank[c.Verdict]
		if !ok {
			r = rank[Indeterminate]
		}
		if r > rank[v] {
			v = c.Verdict
		}
	}
	return v
}

// CellText is a cell's verdict in words: with its exercises' count when
// they did not all agree ("fail: 1 of 3 exercises").
func (c *MatrixCell) CellText() string {
	n := 0
	for _, x := range c.Counts {
		n += x
	}
	if c.Verdict == Missing || c.Verdict == Pass || c.Counts[c.Verdict] == n {
		return c.Verdict
	}
	return fmt.Sprintf("%s: %d of %d exercises", c.Verdict, c.Counts[c.Verdict], n)
}

// Markdown renders the table (bases down, kernels across), then one line
// per exercise that did not pass with why, and the status: the step summary
// of the kernel-matrix workflow.
func (m *Matrix) Markdown() string {
	var b strings.Builder
	b.WriteString("| base |")
	for _, k := range m.Kernels {
		fmt.Fprintf(&b, " %s |", k)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(m.Kernels)) + "\n")
	for bi, base := range m.Bases {
		fmt.Fprintf(&b, "| %s |", base)
		for k := range m.Kernels {
			fmt.Fprintf(&b, " %s |", m.Cell(bi, k).CellText())
		}
		b.WriteString("\n")
	}
	var notes []string
	for _, c := range m.Cells {
		if c.Verdict == Missing {
			notes = append(notes, fmt.Sprintf("- %s × %s: missing: its leg left no result", c.Base, c.Kernel))
			continue
		}
		for _, x := range c.Result.Cells {
			if x.Verdict != Pass {
				notes = append(notes, fmt.Sprintf("- %s × %s × %s: %s: %s", c.Base, c.Kernel, x.Exercise, x.Verdict, firstLine(x.Why)))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\nstatus %d: %d base(s) × %d kernel(s)\n", m.Status, len(m.Bases), len(m.Kernels))
	return b.String()
}

// firstLine keeps a reason to its first line and a table-friendly length.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// SortedKeys returns the keys of sets, sorted: a plan's bases.
func SortedKeys(sets []BaseSet) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Key)
	}
	sort.Strings(out)
	return out
}
