package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/repro"
)

// Meta is what a report knows beyond the result.
type Meta struct {
	Title   string
	Started time.Time
	// Seconds is the whole run's wall time.
	Seconds float64
	// Dir is the directory the page is written into: links to a run's
	// artefacts are relative to it ("": their absolute paths).
	Dir string
}

// Repro renders a repro result: the two kernels as the matrix, one section
// per difference (the refusal on each kernel beside its audit records, the
// rows that would grant it), the refusals both made alike, the timings of
// each side and the provenance.
func Repro(res *repro.Result, m Meta) ([]byte, error) {
	return Render(ReproPage(res, m))
}

// ReproPage builds the page Repro renders.
func ReproPage(res *repro.Result, m Meta) *Page {
	p := &Page{Title: or(m.Title, "lockstep repro"), Command: res.Command, Generated: m.Started}
	switch res.Status {
	case repro.StatusSame:
		p.Verdict, p.Headline = Same, fmt.Sprintf("Both kernels refused the same (%d refusal(s) alike).", len(res.Same))
	case repro.StatusDiffer:
		p.Verdict, p.Headline = Differ, fmt.Sprintf("%d difference(s) between the kernels; %d refusal(s) alike.", len(res.Differences), len(res.Same))
	default:
		p.Verdict, p.Headline = Indeterminate, "Indeterminate: "+res.Reason
	}
	p.Matrix = reproMatrix(res)
	for i, d := range res.Differences {
		p.Sections = append(p.Sections, differenceSection(res, i, d))
	}
	if len(res.Same) > 0 {
		s := Section{ID: "alike", Title: "Refused alike on both kernels", Verdict: Same}
		for _, pr := range res.Same {
			s.Pairs = append(s.Pairs, refusalPair(res.Kernels[0].Observation, &pr.A), refusalPair(res.Kernels[1].Observation, &pr.B))
		}
		p.Sections = append(p.Sections, s)
	}
	for _, o := range res.Kernels {
		if len(o.AuditOnly) > 0 {
			s := Section{ID: "audit-only-" + o.Kernel, Title: "Records no strace refusal took on " + o.Kernel, Verdict: Indeterminate}
			for _, a := range o.AuditOnly {
				s.Pairs = append(s.Pairs, Pair{Side: o.Kernel, Audit: []string{a}, Kind: "audit-only"})
			}
			p.Sections = append(p.Sections, s)
		}
	}
	for _, o := range res.Kernels {
		p.Timings = append(p.Timings, sideTiming(o))
	}
	p.Provenance = append(p.Provenance, KV{"command", strings.Join(res.Command, " ")}, KV{"policy hash", res.PolicyHash})
	for _, o := range res.Kernels {
		p.Provenance = append(p.Provenance, sideProvenance(o)...)
	}
	if m.Seconds > 0 {
		p.Provenance = append(p.Provenance, KV{"wall time", fmt.Sprintf("%.1f s", m.Seconds)})
	}
	return p
}

// reproMatrix has one row per kernel: its ABI, audit, status, refusals
// and outcome.
func reproMatrix(res *repro.Result) *Matrix {
	mx := &Matrix{Corner: "kernel", Columns: []string{"Landlock ABI", "audit", "status", "refusals", "outcome"}}
	for side, o := range res.Kernels {
		audit := "records"
		if !o.Audit {
			audit = "none: " + o.AuditReason
		}
		out := Cell{Verdict: Pass, Text: "observed"}
		switch {
		case o.Indeterminate != "":
			out = Cell{Verdict: Indeterminate, Text: "indeterminate"}
		case len(o.Unenforceable) > 0:
			out = Cell{Verdict: Fail, Text: "policy unenforceable"}
		case differs(res, side):
			out = Cell{Verdict: Fail, Text: "refused differently", Anchor: "difference-1"}
		}
		mx.Rows = append(mx.Rows, MatrixRow{Name: fmt.Sprintf("%s (%s)", o.Kernel, o.Release), Cells: []Cell{
			{Verdict: "none", Text: fmt.Sprint(o.ABI)}, {Verdict: "none", Text: audit},
			{Verdict: "none", Text: fmt.Sprint(o.Status)}, {Verdict: "none", Text: fmt.Sprint(len(o.Refusals))}, out}})
	}
	return mx
}

// differenceSection shows difference i: each kernel's refusal (or none)
// with the rows that would grant it, or the rules a kernel cannot enforce.
func differenceSection(res *repro.Result, i int, d repro.Difference) Section {
	s := Section{ID: fmt.Sprintf("difference-%d", i+1), Title: fmt.Sprintf("Difference %d: %s", i+1, d.Kind), Verdict: Differ,
		Notes: []string{d.Summary}}
	for side, r := range []*engine.Refusal{d.A, d.B} {
		o := res.Kernels[side]
		switch {
		case d.Kind == repro.KindUnenforceable:
		case r == nil:
			s.Pairs = append(s.Pairs, Pair{Side: o.Kernel, Kind: "allowed", Note: "no refusal, no record"})
		default:
			s.Pairs = append(s.Pairs, refusalPair(o.Observation, r))
			s.Rows = appendNew(s.Rows, r.Grant...)
		}
	}
	for _, r := range d.Rules {
		s.Checks = append(s.Checks, Check{Name: r.Rule, Verdict: Fail,
			Detail: fmt.Sprintf("%s (Landlock ABI %d) cannot enforce it: needs ABI %d (%s); the enforcer refused, nothing ran",
				res.Kernels[d.Side].Kernel, res.Kernels[d.Side].ABI, r.NeedABI, r.Why)})
	}
	return s
}

func differs(res *repro.Result, side int) bool {
	for _, d := range res.Differences {
		if (side == 0 && d.A != nil) || (side == 1 && d.B != nil) {
			return true
		}
	}
	return false
}

func refusalPair(o *engine.Observation, r *engine.Refusal) Pair {
	pr := Pair{Side: o.Kernel, Strace: r.Line, Audit: r.Audit, Kind: "matched"}
	if pr.Strace == "" {
		pr.Strace = fmt.Sprintf("%s %s = %s", r.Call, strings.Join(r.Objects, " "), r.Errno)
	}
	if len(r.Audit) == 0 {
		pr.Kind = "strace-only"
		if !o.Audit {
			pr.Note = "no audit on this kernel: " + o.AuditReason
		}
	}
	return pr
}

func sideTiming(o *repro.Side) Timing {
	if g := o.Guest; g != nil {
		return Timing{Label: o.Kernel, Phases: []Phase{{"boot", (g.Timings.Accel + g.Timings.Initramfs + g.Timings.Boot).Seconds()},
			{"runs", g.Timings.Job.Seconds()}, {"teardown", g.Timings.Shutdown.Seconds()}}}
	}
	return Timing{Label: o.Kernel, Phases: []Phase{{"runs", o.Seconds}}}
}

func sideProvenance(o *repro.Side) []KV {
	kv := []KV{{o.Kernel + ": release", fmt.Sprintf("%s, Landlock ABI %d", o.Release, o.ABI)}}
	if g := o.Guest; g != nil {
		if g.Pin != "" {
			kv = append(kv, KV{o.Kernel + ": pin", g.Pin})
		}
		kv = append(kv, KV{o.Kernel + ": bzImage sha256", g.BzImageSHA256}, KV{o.Kernel + ": initramfs sha256", g.InitramfsSHA256},
			KV{o.Kernel + ": accel", fmt.Sprintf("%s%s, %d vCPU, %d MiB, %s", g.Accel, cpuModel(g.CPU), g.VCPUs, g.MemMB, g.QEMUVersion)})
	}
	return kv
}

// cpuModel is ", -cpu <model>" for a record that names the guest's CPU
// model, "" for one made before it was kept.
func cpuModel(cpu string) string {
	if cpu == "" {
		return ""
	}
	return ", -cpu " + cpu
}

func appendNew(s []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, x := range s {
			found = found || x == a
		}
		if !found {
			s = append(s, a)
		}
	}
	return s
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
