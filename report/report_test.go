package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// TestVerifyPageInconclusive renders a real cell whose joint runs ran out
// of the policy's 3 s timeout (testdata/README.md): the page, the matrix
// cell and the joint runs say inconclusive, in their own colour, and the
// headline counts it apart from indeterminate.
func TestVerifyPageInconclusive(t *testing.T) {
	c, err := verify.ReadCell("testdata/verify-host-inconclusive-cell.json")
	if err != nil {
		t.Fatal(err)
	}
	res := &verify.Result{Schema: verify.ResultSchema, Status: verify.StatusIndeterminate, Key: "generic",
		Kernels: []verify.KernelInfo{{Name: c.Kernel, ABI: c.ABI}}, Exercises: []string{c.Exercise}, Cells: []*verify.Cell{c}}
	p := VerifyPage(res, Meta{})
	if p.Verdict != Inconclusive || !strings.Contains(p.Headline, "0 indeterminate, 1 inconclusive") {
		t.Errorf("page verdict %q, headline %q; want %s counted apart", p.Verdict, p.Headline, Inconclusive)
	}
	page, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="verdict">inconclusive<`, `class="cell inconclusive"`, `.inconclusive {`,
		`<span class="badge inconclusive">inconclusive</span></td><td>timeout`, "ran out of time (3s"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestObservePagePairsAndArtefacts renders a real observe run's files
// (testdata/observe-fixture-7.2.13-pairs, README.md): the cross-check lists
// every matched pair, the strace line beside its audit record, and the
// artefacts next to run.json are linked relative to the page.
func TestObservePagePairsAndArtefacts(t *testing.T) {
	dir := "testdata/observe-fixture-7.2.13-pairs"
	var sum observer.Summary
	b, err := os.ReadFile(filepath.Join(dir, observer.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Exercises) == 0 || len(sum.Exercises[0].Matched) == 0 {
		t.Fatalf("the captured observe.json has no matched pairs: %+v", sum.Exercises)
	}
	matched := sum.Exercises[0].Matched
	page, err := ObserveDir(dir, Meta{Started: time.Date(2026, 12, 2, 2, 10, 0, 0, time.UTC), Dir: "testdata"})
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if n := strings.Count(html, "&#x2194; matched"); n < len(matched) {
		t.Errorf("%d matched row(s) on the page, want the %d pairs", n, len(matched))
	}
	for _, m := range matched {
		if !strings.Contains(html, m.Line) && !strings.Contains(html, templateEscape(m.Line)) {
			t.Errorf("the page lacks the matched strace line %q", m.Line)
		}
	}
	for _, n := range []string{observer.ConsoleFile, observer.AuditRawFile, observer.KernelConfigFile} {
		if want := `<a href="observe-fixture-7.2.13-pairs/` + n + `">` + n + `</a>`; !strings.Contains(html, want) {
			t.Errorf("the page lacks the link %s", want)
		}
	}
}

// templateEscape is html/template's escaping of text, for comparisons.
func templateEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;")
	return r.Replace(s)
}

// TestPagesNameTimeFactor: a verify cell and an observe run whose runs'
// time limits were scaled under TCG say so in the provenance; unscaled
// ones say nothing of it.
func TestPagesNameTimeFactor(t *testing.T) {
	c, err := verify.ReadCell("testdata/verify-host-inconclusive-cell.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, factor := range []int{0, 10} {
		c.TimeFactor = factor
		res := &verify.Result{Schema: verify.ResultSchema, Status: verify.StatusIndeterminate, Key: "generic",
			Kernels: []verify.KernelInfo{{Name: c.Kernel, ABI: c.ABI}}, Exercises: []string{c.Exercise}, Cells: []*verify.Cell{c}}
		obs := &observer.HostResult{Summary: &observer.Summary{Schema: observer.SummarySchema, Key: "k", TimeFactor: factor}}
		for name, p := range map[string]*Page{"verify": VerifyPage(res, Meta{}), "observe": ObservePage(obs, "k", t.TempDir(), Meta{})} {
			var got bool
			for _, kv := range p.Provenance {
				got = got || strings.Contains(kv.Value, "time limits ×10 under TCG")
			}
			if got != (factor == 10) {
				t.Errorf("%s page with factor %d: names the factor %v; provenance %+v", name, factor, got, p.Provenance)
			}
		}
	}
}

// TestVerifyMatrixPage renders the kernel matrix from a real leg's document
// (../verify/testdata/matrix, its README) in a plan of two kernels: the
// base's row has the pass linked to its exercise's section, and the leg
// that left nothing grey and "missing"; the page's verdict is not a pass.
func TestVerifyMatrixPage(t *testing.T) {
	b, err := os.ReadFile("../verify/testdata/matrix/generic-7.2.13.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Bases []*verify.Result `json:"bases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	plan, err := verify.NewPlan([]string{"generic"}, []string{"6.12.117", "7.2.13"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := verify.NewMatrix(plan, doc.Bases)
	if err != nil {
		t.Fatal(err)
	}
	p := VerifyMatrixPage(m, Meta{Title: "kernel matrix"})
	if p.Verdict != Indeterminate || !strings.Contains(p.Headline, "1 pass, 0 fail, 0 indeterminate, 0 inconclusive, 1 missing") {
		t.Errorf("page verdict %q, headline %q; want indeterminate with the missing leg counted", p.Verdict, p.Headline)
	}
	page, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<th>base \ kernel</th><th>6.12.117</th><th>7.2.13</th>`, `<td class="cell none">missing</td>`,
		`<td class="cell pass"><a href="#leg-0-1-0">pass</a></td>`, `id="leg-0-1-0"`, "generic: 7.2.13 × shell-reference"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestPagesNameCPUModel: the verify and repro pages name the CPU model a
// guest ran on (the KVM probe's choice, --cpu or $LOCKSTEP_CPU), as the
// observe page does, and records made before it was kept name none.
func TestPagesNameCPUModel(t *testing.T) {
	b, err := os.ReadFile("testdata/verify-7.2.13-generic.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []string{"host,-xsave", ""} {
		var res verify.Result
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		rr := reproResult(t)
		for _, c := range res.Cells {
			if c.Guest != nil {
				c.Guest.CPU = cpu
			}
		}
		for _, o := range rr.Kernels {
			if o.Guest != nil {
				o.Guest.CPU = cpu
			}
		}
		for name, p := range map[string]*Page{"verify": VerifyPage(&res, Meta{}), "repro": ReproPage(rr, Meta{})} {
			var named, model bool
			for _, kv := range p.Provenance {
				named = named || strings.Contains(kv.Value, "-cpu ")
				model = model || strings.Contains(kv.Value, "kvm, -cpu "+cpu+", 1 vCPU") || strings.Contains(kv.Value, "tcg, -cpu "+cpu+", 1 vCPU")
			}
			if named != (cpu != "") || (cpu != "" && !model) {
				t.Errorf("%s page, guest cpu %q: names a model %v, this one %v; provenance %+v", name, cpu, named, model, p.Provenance)
			}
		}
	}
}
