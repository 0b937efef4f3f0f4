package attribute

import (
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// BenchmarkRefusals attributes every call of a real exercise capture (the
// C reference: make, gcc, the compiled programs).
func BenchmarkRefusals(b *testing.B) {
	tr, err := strace.ParseFile("../../testdata/strace/c-broad.strace.gz")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n = len(Refusals(tr.Calls, Options{}))
	}
	if n == 0 {
		b.Fatal("no refusals")
	}
	b.ReportMetric(float64(len(tr.Calls))*float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
