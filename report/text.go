package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/repro"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// The plain-text forms below are what the verbs print on stdout: the same
// results the HTML pages render, for a terminal.

// VerifyText writes a verify result as text: the kernel × exercise matrix
// of verdicts, every cell that did not pass with its refused calls and
// their audit records, and the status line.
func VerifyText(w io.Writer, res *verify.Result) {
	width := 8
	for _, k := range res.Kernels {
		width = max(width, len(k.Name)+2)
	}
	fmt.Fprintf(w, "%-*s", width, "kernel")
	for _, e := range res.Exercises {
		fmt.Fprintf(w, "  %-20s", e)
	}
	fmt.Fprintln(w)
	for ki, k := range res.Kernels {
		fmt.Fprintf(w, "%-*s", width, k.Name)
		for ei := range res.Exercises {
			fmt.Fprintf(w, "  %-20s", res.Cell(ki, ei).Verdict)
		}
		fmt.Fprintln(w)
	}
	for _, c := range res.Cells {
		if c.Verdict != verify.Pass {
			cellText(w, c)
		}
	}
	fmt.Fprintf(w, "\nstatus %d: %d kernel(s) × %d exercise(s) in %.1f s wall (guests' own time %.1f s, parallel %d)\n",
		res.Status, len(res.Kernels), len(res.Exercises), res.WallSeconds, res.GuestSeconds, res.Parallel)
}

// cellText writes a cell that did not pass: its verdict and why, and the
// diagnosis's refused calls.
func cellText(w io.Writer, c *verify.Cell) {
	fmt.Fprintf(w, "\n%s × %s: %s: %s%s\n", c.Kernel, c.Exercise, c.Verdict, c.Why, TimeFactorNote("; ", c.TimeFactor))
	if c.Diagnosis == nil {
		return
	}
	for _, r := range c.Diagnosis.Refusals {
		fmt.Fprintf(w, "  refused %s %s (%s); grant: %s\n", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","), strings.Join(r.Grant, "; "))
		for _, a := range r.Audit {
			fmt.Fprintf(w, "    audit: %s\n", a)
		}
	}
}

// BaseDirText writes verify --base-dir's result as text: each base's
// matrix (VerifyText) with the exercise files each cell combined, then the
// status line.
func BaseDirText(w io.Writer, out *verify.BaseDirResult) {
	for _, res := range out.Bases {
		fmt.Fprintf(w, "== %s (key %s)\n", strings.Join(res.Policies, " + "), res.Key)
		VerifyText(w, res)
		layersText(w, res)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "status %d: %d base(s) of %s in %.1f s wall, every base's cells in one pool\n", out.Status, len(out.Bases), out.BaseDir, out.WallSeconds)
}

// layersText writes which exercise files each kernel's cells combined, so
// an ABI-10 sidecar left out on an older kernel is visible in the matrix.
func layersText(w io.Writer, res *verify.Result) {
	for _, c := range res.Cells {
		names := make([]string, len(c.Layers))
		for i, l := range c.Layers {
			names[i] = filepath.Base(l)
		}
		if len(names) == 0 {
			names = []string{"(the base alone)"}
		}
		fmt.Fprintf(w, "  %s × %s: with %s\n", c.Kernel, c.Exercise, strings.Join(names, ", "))
	}
}

// TimeFactorNote is sep and engine.FactorNote for a factor above 1, else "".
func TimeFactorNote(sep string, factor int) string {
	if n := engine.FactorNote(factor); n != "" {
		return sep + n
	}
	return ""
}

// ReproText writes a repro result as text: each kernel's side, every
// difference with the refusals, audit records and grants behind it, and
// the verdict line.
func ReproText(w io.Writer, res *repro.Result) {
	for _, o := range res.Kernels {
		audit := "audit records"
		if !o.Audit {
			audit = "no audit: " + o.AuditReason
		}
		fmt.Fprintf(w, "%-10s %s, Landlock ABI %d, %s; status %d, %d refusal(s)\n", o.Kernel, o.Release, o.ABI, audit, o.Status, len(o.Refusals))
	}
	for i, d := range res.Differences {
		differenceText(w, res, i, d)
	}
	switch res.Status {
	case repro.StatusSame:
		fmt.Fprintf(w, "\nsame: %d refusal(s) on both kernels alike\n", len(res.Same))
	case repro.StatusDiffer:
		fmt.Fprintf(w, "\n%d difference(s), %d refusal(s) alike\n", len(res.Differences), len(res.Same))
	default:
		fmt.Fprintf(w, "\nindeterminate: %s\n", res.Reason)
	}
}

// differenceText writes difference i of a repro result: each side's
// refusal (or that it allowed the call) and the rules a side cannot
// enforce.
func differenceText(w io.Writer, res *repro.Result, i int, d repro.Difference) {
	fmt.Fprintf(w, "\ndifference %d (%s): %s\n", i+1, d.Kind, d.Summary)
	for side, r := range []*engine.Refusal{d.A, d.B} {
		k := res.Kernels[side].Kernel
		switch {
		case d.Kind == repro.KindUnenforceable:
			continue
		case r == nil:
			fmt.Fprintf(w, "  %-10s allowed\n", k)
			continue
		}
		fmt.Fprintf(w, "  %-10s refused %s %s (%s)\n", k, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","), r.Errno)
		fmt.Fprintf(w, "  %-10s strace: %s\n", "", r.Line)
		for _, a := range r.Audit {
			fmt.Fprintf(w, "  %-10s audit:  %s\n", "", a)
		}
		if len(r.Audit) == 0 && res.Kernels[side].Audit {
			fmt.Fprintf(w, "  %-10s audit:  (no record joined)\n", "")
		}
		fmt.Fprintf(w, "  %-10s grant:  %s\n", "", strings.Join(r.Grant, "; "))
	}
	for _, r := range d.Rules {
		fmt.Fprintf(w, "  %-10s cannot enforce %s: needs Landlock ABI %d (%s)\n", res.Kernels[d.Side].Kernel, r.Rule, r.NeedABI, r.Why)
	}
}

// ObserveText writes an observe run's line per exercise of key (verified,
// or why not).
func ObserveText(w io.Writer, res *observer.HostResult, key string) {
	if res.Summary == nil {
		return
	}
	for _, e := range res.Summary.Exercises {
		state := "verified"
		switch {
		case e.Inconclusive:
			state = "INCONCLUSIVE: " + e.Reason
		case !e.Verified:
			state = "FAILED: " + e.Reason
		}
		fmt.Fprintf(w, "%s_%s: %s\n", key, e.Exercise, state)
	}
}

// ObserveFactor is the time factor an observe run's guest reported (1 when
// none).
func ObserveFactor(res *observer.HostResult) int {
	if res.Summary == nil {
		return 1
	}
	return max(res.Summary.TimeFactor, 1)
}

// KeyedFile is the report's file for one key of a run over every key: the
// key before the extension ("" stays "").
func KeyedFile(html, key string) string {
	if html == "" {
		return ""
	}
	ext := filepath.Ext(html)
	return strings.TrimSuffix(html, ext) + "-" + key + ext
}
