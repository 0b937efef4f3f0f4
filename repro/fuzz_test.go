package repro

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// FuzzObservation feeds guest-written observation documents (outside input
// to the host) through the reader and Compare: an error means no
// observation, and any observation compares with itself as the same (or,
// when nothing could run or it is indeterminate, not as a difference).
func FuzzObservation(f *testing.F) {
	for _, n := range []string{"host-6.18.44-tcp-bind.json", "host-6.18.44-udp-bind.json", "host-6.18.44-udp-allow.json", "linux-7.2.13-udp-bind.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := engine.ParseObservation("fuzz", b)
		if err != nil {
			if o != nil {
				t.Fatalf("ReadObservation = %+v, %v: an error with a result", o, err)
			}
			return
		}
		var twin engine.Observation
		if err := json.Unmarshal(b, &twin); err != nil {
			t.Fatal(err)
		}
		res := Compare(o, &twin)
		if res.Status == StatusDiffer {
			t.Fatalf("an observation differs from itself: %+v", res.Differences)
		}
	})
}

func BenchmarkCompare(b *testing.B) {
	a, err := engine.ReadObservation("testdata/host-6.18.44-tcp-bind.json")
	if err != nil {
		b.Fatal(err)
	}
	for range 200 {
		a.Refusals = append(a.Refusals, a.Refusals[0])
	}
	c := *a
	b.ReportAllocs()
	for b.Loop() {
		Compare(a, &c)
	}
}
