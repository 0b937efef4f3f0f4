package repro

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

func load(t *testing.T, name string) *engine.Observation {
	t.Helper()
	o, err := engine.ReadObservation(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// udpRefused is the 7.2.13 guest's real observation of the UDP bind
// (Landlock ABI 10 refuses it, net.bind_udp record joined).
func udpRefused(t *testing.T) *engine.Observation { return load(t, "linux-7.2.13-udp-bind.json") }

func TestCompare(t *testing.T) {
	tests := []struct {
		Name       string
		A, B       func(t *testing.T) *engine.Observation
		Status     int
		Kinds      []string
		Same       int
		InSummary  string
		ReasonPart string
	}{
		{Name: "SameRefusal", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-tcp-bind.json") },
			B: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-tcp-bind.json") }, Status: StatusSame, Same: 1},
		{Name: "NothingRefused", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-bind.json") },
			B: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-bind.json") }, Status: StatusSame},
		{Name: "UDPBindRefusedOnABI10", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-bind.json") },
			B: udpRefused, Status: StatusDiffer, Kinds: []string{KindRefusedOnOne},
			InSummary: "bind 5000/udp: refused on 7.2.13 (net.bind_udp), allowed on host; granted by [bind] allow 5000 udp"},
		{Name: "RefusedOnFirstOnly", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-tcp-bind.json") },
			B: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-bind.json") }, Status: StatusDiffer,
			Kinds: []string{KindRefusedOnOne}, InSummary: "refused on host (net.bind_tcp)"},
		{Name: "OtherRights", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-tcp-bind.json") },
			B: func(t *testing.T) *engine.Observation {
				o := load(t, "host-6.18.44-tcp-bind.json")
				o.Refusals[0].Rights = []string{"net.bind_tcp", "net.connect_tcp"}
				return o
			}, Status: StatusDiffer, Kinds: []string{KindRights}},
		{Name: "UDPRuleUnenforceableOnHost", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-allow.json") },
			B: func(t *testing.T) *engine.Observation {
				o := load(t, "host-6.18.44-udp-bind.json")
				o.Kernel, o.ABI = "7.2.13", 10
				return o
			}, Status: StatusDiffer, Kinds: []string{KindUnenforceable},
			InSummary: "host (Landlock ABI 7) cannot enforce [bind] allow 5000 udp (needs Landlock ABI 10); nothing ran there"},
		{Name: "UnenforceableOnBoth", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-allow.json") },
			B: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-udp-allow.json") }, Status: StatusIndeterminate,
			ReasonPart: "nothing ran on either"},
		{Name: "IndeterminateSide", A: func(t *testing.T) *engine.Observation { return load(t, "host-6.18.44-tcp-bind.json") },
			B: func(t *testing.T) *engine.Observation {
				return &engine.Observation{Schema: engine.ObservationSchema, Kernel: "7.2.13", Indeterminate: "the guest did not report: boot timed out"}
			}, Status: StatusIndeterminate, Kinds: []string{KindRefusedOnOne}, ReasonPart: "7.2.13: the guest did not report"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			res := Compare(tt.A(t), tt.B(t))
			if res.Status != tt.Status {
				t.Errorf("Status = %d (%s), want %d", res.Status, res.Reason, tt.Status)
			}
			var kinds []string
			for _, d := range res.Differences {
				kinds = append(kinds, d.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tt.Kinds, ",") {
				t.Errorf("difference kinds = %v, want %v", kinds, tt.Kinds)
			}
			if len(res.Same) != tt.Same {
				t.Errorf("len(Same) = %d, want %d", len(res.Same), tt.Same)
			}
			if tt.InSummary != "" && (len(res.Differences) == 0 || !strings.Contains(res.Differences[0].Summary, tt.InSummary)) {
				t.Errorf("differences = %+v, want a summary containing %q", res.Differences, tt.InSummary)
			}
			if !strings.Contains(res.Reason, tt.ReasonPart) {
				t.Errorf("Reason = %q, want it to contain %q", res.Reason, tt.ReasonPart)
			}
		})
	}
}

// TestCompareUDPNamesRecordAndRow: the UDP difference carries the ABI-10
// kernel's audit record and the row that grants the bind, and says the
// other kernel allowed it (B refused, A nil).
func TestCompareUDPNamesRecordAndRow(t *testing.T) {
	res := Compare(load(t, "host-6.18.44-udp-bind.json"), udpRefused(t))
	if len(res.Differences) != 1 {
		t.Fatalf("differences = %+v, want exactly one", res.Differences)
	}
	d := res.Differences[0]
	if d.A != nil || d.B == nil {
		t.Fatalf("A, B = %v, %v; want the host allowing and 7.2.13 refusing", d.A, d.B)
	}
	if d.B.Call != "bind" || len(d.B.Audit) != 1 || !strings.Contains(d.B.Audit[0], "blockers=net.bind_udp") {
		t.Errorf("B = %+v, want bind with its net.bind_udp record", d.B)
	}
	if strings.Join(d.B.Grant, ";") != "[bind] allow 5000 udp" {
		t.Errorf("Grant = %q, want [bind] allow 5000 udp", d.B.Grant)
	}
}

// TestLineUpRepeats: the n-th refusal of a key pairs with the n-th; an
// extra repeat on one side is a difference.
func TestLineUpRepeats(t *testing.T) {
	a := load(t, "host-6.18.44-tcp-bind.json")
	b := load(t, "host-6.18.44-tcp-bind.json")
	b.Refusals = append(b.Refusals, b.Refusals[0])
	res := Compare(a, b)
	if res.Status != StatusDiffer || len(res.Same) != 1 || len(res.Differences) != 1 || res.Differences[0].A != nil {
		t.Errorf("Compare = status %d, same %d, differences %+v; want one pair and B's repeat as the difference",
			res.Status, len(res.Same), res.Differences)
	}
}

func TestGrantRows(t *testing.T) {
	o := load(t, "host-6.18.44-tcp-bind.json")
	if got := strings.Join(o.Refusals[0].Grant, ";"); got != "[bind] allow 5000" {
		t.Errorf("captured grant = %q, want [bind] allow 5000", got)
	}
}
