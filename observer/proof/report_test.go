package proof

import (
	"strings"
	"testing"
)

func TestReportFinish(t *testing.T) {
	held := Check{Name: "read_file", Outcome: Held}
	tests := []struct {
		Name   string
		Checks []Check
		Want   int
		Says   string
	}{
		{"AllHeld", []Check{{Name: "abi", Gate: true, Outcome: Held}, held}, StatusHeld, "status 0"},
		{"NotOfferedIsNoFailure", []Check{held, {Name: "bind_udp", Outcome: NotOffered}}, StatusHeld, "1 not offered"},
		{"RefusalFailed", []Check{held, {Name: "truncate", Outcome: Failed}}, StatusFailed, "status 1"},
		{"RecordsLost", []Check{held, {Name: "truncate", Outcome: Indeterminate}}, StatusIndeterminate, "status 3"},
		{"FailedBeatsIndeterminate", []Check{{Name: "a", Outcome: Indeterminate}, {Name: "b", Outcome: Failed}}, StatusFailed, "status 1"},
		// A kernel below the pin's ABI is never 0 and never a mere failure,
		// whatever the refusals say.
		{"ABIBelowPin", []Check{{Name: "abi", Gate: true, Outcome: Failed, Detail: "Landlock ABI 7, the pin wants at least 10"}, held, {Name: "truncate", Outcome: Failed}},
			StatusIndeterminate, "abi failed: Landlock ABI 7"},
		{"NoAudit", []Check{{Name: "audit", Gate: true, Outcome: Failed, Detail: "pid 9 holds the slot"}, {Name: "read_file", Outcome: Indeterminate}},
			StatusIndeterminate, "audit failed"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			r := &Report{Checks: tt.Checks}
			r.Finish()
			if r.Status != tt.Want || r.Schema != Schema || !strings.Contains(r.Summary(), tt.Says) {
				t.Errorf("Finish() = status %d (%q), want %d mentioning %q", r.Status, r.Summary(), tt.Want, tt.Says)
			}
			var b strings.Builder
			if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), tt.Checks[0].Name) {
				t.Errorf("WriteTable() = %v:\n%s", err, b.String())
			}
		})
	}
}

func TestRefusalsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Refusals {
		if seen[r.Name] {
			t.Errorf("refusal %s listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.ABI() < 1 || r.ABI() > 10 {
			t.Errorf("%s: ABI %d", r.Name, r.ABI())
		}
		if got, ok := LookupRefusal(r.Name); !ok || got != r {
			t.Errorf("LookupRefusal(%q) = %+v, %v", r.Name, got, ok)
		}
	}
	if len(Refusals) != 16 {
		t.Errorf("%d refusals, want the 16 right classes", len(Refusals))
	}
}
