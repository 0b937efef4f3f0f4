package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Verdicts, also the CSS classes of matrix cells.
const (
	Pass          = "pass"
	Fail          = "fail"
	Indeterminate = "indeterminate"
	Differ        = "differ"
	Same          = "same"
	// Inconclusive is a run that ran out of time before anything was
	// found: no difference, no pass.
	Inconclusive = "inconclusive"
)

// Page is everything one report shows. Repro, Verify and Observe fill it;
// Render turns it into HTML.
type Page struct {
	Title string
	// Verdict is the run's outcome (a verdict constant), Headline its one
	// line.
	Verdict  string
	Headline string
	// Command is what ran, if one command did.
	Command []string
	// Matrix is the verdict grid; nil leaves it out.
	Matrix *Matrix
	// Sections are the per-exercise (or per-difference) details.
	Sections []Section
	// Timings are the bar chart's bars.
	Timings []Timing
	// Provenance is what the run rests on: pins, hashes, accel.
	Provenance []KV
	// Artefacts link the run's files (a console, raw audit lines, a
	// kernel configuration).
	Artefacts []Link
	// Generated is when the page was made.
	Generated time.Time
}

// Matrix is a grid of verdicts: one row per kernel, one column per
// exercise (or per kernel side).
type Matrix struct {
	Corner  string
	Columns []string
	Rows    []MatrixRow
}

// MatrixRow is one row of the matrix.
type MatrixRow struct {
	Name  string
	Cells []Cell
}

// Cell is one verdict: Verdict is its colour class, Text what it says,
// Anchor the section it links to ("" for none).
type Cell struct {
	Verdict string
	Text    string
	Anchor  string
}

// Section is one exercise on one kernel, or one difference.
type Section struct {
	ID      string
	Title   string
	Verdict string
	// Notes are lines of explanation (why a verdict, a reason).
	Notes []string
	// Pairs put strace's refusals beside the audit records; matched pairs
	// share a row.
	Pairs []Pair
	// Rows are the policy rows added (or that would grant).
	Rows []string
	// Checks are named outcomes (containment probes).
	Checks []Check
}

// Pair is one line of the side-by-side view. Kind is "matched" (both),
// "strace-only", "audit-only" or "allowed" (neither: the kernel let the
// call through); Side names the kernel when a section
// compares two.
type Pair struct {
	Side   string
	Strace string
	Audit  []string
	Kind   string
	Note   string
}

// Check is a named outcome.
type Check struct {
	Name    string
	Verdict string
	Detail  string
}

// Timing is one bar: a label and its phases in seconds.
type Timing struct {
	Label  string
	Phases []Phase
}

// Phase is one part of a bar.
type Phase struct {
	Name    string
	Seconds float64
}

// Link is one artefact: its name and where the page finds it.
type Link struct {
	Name, Href string
}

// KV is one provenance line.
type KV struct {
	Key, Value string
}

//go:embed page.html.tmpl
var pageTemplate string

// tmpl is parsed on first use, not at start-up: every lockstep process (the
// enforcer's child, a guest's PID 1) links this package, few render a page.
var tmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"join": strings.Join,
		"secs": func(s float64) string { return fmt.Sprintf("%.2f s", s) },
		"add":  func(a, b int) int { return a + b },
	}).Parse(pageTemplate))
})

// chart is the SVG geometry of the timings.
type chart struct {
	Width, Height int
	Bars          []bar
	Legend        []legend
	Ticks         []tick
}

type bar struct {
	Y     int
	Label string
	Total string
	Segs  []seg
}

type seg struct {
	X, W  float64
	Class string
	Title string
}

type legend struct {
	X     int
	Class string
	Name  string
}

type tick struct {
	X     float64
	Label string
}

const (
	chartLeft  = 170
	chartWidth = 560
	barHeight  = 22
)

// phaseClasses colours phases by name; unknown names cycle.
var phaseClasses = map[string]string{"boot": "ph-boot", "runs": "ph-runs", "run": "ph-runs", "job": "ph-runs",
	"teardown": "ph-down", "shutdown": "ph-down", "initramfs": "ph-init", "accel": "ph-init"}

func buildChart(ts []Timing) *chart {
	if len(ts) == 0 {
		return nil
	}
	maxT := 0.0
	for _, t := range ts {
		sum := 0.0
		for _, p := range t.Phases {
			sum += p.Seconds
		}
		maxT = math.Max(maxT, sum)
	}
	if maxT <= 0 {
		maxT = 1
	}
	scale := float64(chartWidth) / maxT
	c := &chart{Width: chartLeft + chartWidth + 90}
	seen := map[string]bool{}
	for i, t := range ts {
		b := bar{Y: 10 + i*(barHeight+8), Label: shorten(t.Label, 26)}
		x, sum := float64(chartLeft), 0.0
		for _, p := range t.Phases {
			cls := phaseClasses[p.Name]
			if cls == "" {
				cls = "ph-other"
			}
			w := p.Seconds * scale
			b.Segs = append(b.Segs, seg{X: x, W: w, Class: cls, Title: fmt.Sprintf("%s: %.2f s", p.Name, p.Seconds)})
			x += w
			sum += p.Seconds
			if !seen[p.Name] {
				seen[p.Name] = true
				c.Legend = append(c.Legend, legend{Class: cls, Name: p.Name})
			}
		}
		b.Total = fmt.Sprintf("%.1f s", sum)
		c.Bars = append(c.Bars, b)
	}
	axisY := 10 + len(ts)*(barHeight+8)
	step := niceStep(maxT)
	for v := 0.0; v <= maxT+1e-9; v += step {
		c.Ticks = append(c.Ticks, tick{X: chartLeft + v*scale, Label: fmt.Sprintf("%g s", v)})
	}
	for i := range c.Legend {
		c.Legend[i].X = chartLeft + i*110
	}
	c.Height = axisY + 50
	return c
}

func niceStep(maxT float64) float64 {
	raw := maxT / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow
		}
	}
	return 10 * pow
}

// Render renders the page as one self-contained HTML document: styles and
// the chart (SVG) are inline, nothing is fetched and no script runs.
func Render(p *Page) ([]byte, error) {
	if p.Generated.IsZero() {
		p.Generated = time.Now()
	}
	var b bytes.Buffer
	data := struct {
		*Page
		Chart     *chart
		AxisY     int
		Generated string
	}{Page: p, Chart: buildChart(p.Timings), Generated: p.Generated.UTC().Format(time.RFC3339)}
	if data.Chart != nil {
		data.AxisY = 10 + len(p.Timings)*(barHeight+8)
	}
	if err := tmpl().Execute(&b, data); err != nil {
		return nil, fmt.Errorf("report: render: %w", err)
	}
	return b.Bytes(), nil
}

// shorten keeps the end of a long label (a bzImage path ends in what tells
// it apart), marking the cut with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// WriteFile renders a page and writes it atomically to path; an
// empty path (no --html) writes nothing.
func WriteFile(path string, render func() ([]byte, error)) error {
	if path == "" {
		return nil
	}
	page, err := render()
	if err == nil {
		err = safefile.WriteFile(path, page, 0o644)
	}
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	return nil
}
