package verify

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// legResults reads a captured leg document (testdata/matrix/README.md).
func legResults(t *testing.T) []*Result {
	t.Helper()
	b, err := os.ReadFile("testdata/matrix/generic-7.2.13.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Bases []*Result `json:"bases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Bases) != 1 {
		t.Fatalf("leg document: %v, %d bases", err, len(doc.Bases))
	}
	return doc.Bases
}

// TestNewMatrix lays a real leg's result into a plan of two kernels: its
// cell passes, the leg that left nothing is missing and makes the status
// indeterminate, never a pass; the Markdown table says both.
func TestNewMatrix(t *testing.T) {
	plan, err := NewPlan([]string{"generic"}, []string{"6.12.117", "7.2.13"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Legs) != 2 || plan.Legs[1] != (Leg{Base: "generic", Kernel: "7.2.13"}) {
		t.Fatalf("plan legs %+v", plan.Legs)
	}
	m, err := NewMatrix(plan, legResults(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{m.Cell(0, 0).Verdict, m.Cell(0, 1).Verdict}; got[0] != Missing || got[1] != Pass {
		t.Errorf("cells %v; want missing on 6.12.117, pass on 7.2.13", got)
	}
	if m.Status != StatusIndeterminate {
		t.Errorf("status %d with a missing leg; want %d", m.Status, StatusIndeterminate)
	}
	md := m.Markdown()
	for _, want := range []string{"| base | 6.12.117 | 7.2.13 |", "| generic | missing | pass |", "- generic × 6.12.117: missing: its leg left no result", "status 3: 1 base(s) × 2 kernel(s)"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestMatrixWorstVerdict: a cell is its exercises' worst verdict, counted
// ("fail: 1 of 2 exercises"), and a failing exercise is listed with why.
func TestMatrixWorstVerdict(t *testing.T) {
	r := legResults(t)[0]
	bad := *r.Cells[0]
	bad.Exercise, bad.Verdict, bad.Why = "writes-outside", Fail, "the joint runs disagreed with the reference\nsecond line"
	r.Exercises = append(r.Exercises, bad.Exercise)
	r.Cells = append(r.Cells, &bad)
	plan, _ := NewPlan([]string{"generic"}, []string{"7.2.13"})
	m, err := NewMatrix(plan, []*Result{r})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Cell(0, 0); c.Verdict != Fail || c.CellText() != "fail: 1 of 2 exercises" || m.Status != StatusFail {
		t.Errorf("cell %s (%q), status %d; want fail: 1 of 2 exercises, status 1", c.Verdict, c.CellText(), m.Status)
	}
	if md := m.Markdown(); !strings.Contains(md, "- generic × 7.2.13 × writes-outside: fail: the joint runs disagreed with the reference\n") {
		t.Errorf("Markdown does not list the failing exercise on one line:\n%s", md)
	}
}

// TestNewMatrixRefuses: a result for a leg the plan lacks, or two for one
// leg, is refused by name; an empty axis is no plan.
func TestNewMatrixRefuses(t *testing.T) {
	res := legResults(t)
	plan, _ := NewPlan([]string{"generic"}, []string{"6.12.117"})
	if _, err := NewMatrix(plan, res); err == nil || !strings.Contains(err.Error(), "base generic on kernel 7.2.13, which the plan has no leg for") {
		t.Errorf("an unplanned leg's result = %v; want it refused by name", err)
	}
	plan, _ = NewPlan([]string{"generic"}, []string{"7.2.13"})
	if _, err := NewMatrix(plan, append(res, res...)); err == nil || !strings.Contains(err.Error(), "two results for base generic on kernel 7.2.13") {
		t.Errorf("two results for one leg = %v; want them refused", err)
	}
	if _, err := NewPlan(nil, []string{"7.2.13"}); err == nil {
		t.Error("a plan without bases was accepted")
	}
}

// TestSelectBases keeps the named bases in their order and refuses a key
// without a base, naming the keys there are.
func TestSelectBases(t *testing.T) {
	sets := []BaseSet{{Key: "c"}, {Key: "generic"}, {Key: "python"}}
	got, err := SelectBases(sets, []string{"python", "c"})
	if err != nil || len(got) != 2 || got[0].Key != "c" || got[1].Key != "python" {
		t.Errorf("SelectBases(python, c) = %+v, %v; want c, python", got, err)
	}
	if all, _ := SelectBases(sets, nil); len(all) != 3 {
		t.Errorf("SelectBases() kept %d; want every base", len(all))
	}
	if _, err := SelectBases(sets, []string{"rust"}); err == nil || !strings.Contains(err.Error(), "key(s) rust; there are: c, generic, python") {
		t.Errorf("SelectBases(rust) = %v; want rust named with the keys there are", err)
	}
}
