package enforcer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// BenchmarkCompile compiles a 2,000-path policy for ABI 7 (no kernel calls:
// the stat function is a map), the parent's work before any child starts.
func BenchmarkCompile(b *testing.B) {
	var src strings.Builder
	fs := fakeFS{}
	src.WriteString("[read]\n")
	for i := 0; i < 1000; i++ {
		p := fmt.Sprintf("/usr/lib/pkg%04d", i)
		fs[p] = KindDir
		src.WriteString(p + "\n")
	}
	src.WriteString("[write]\n")
	for i := 0; i < 1000; i++ {
		p := fmt.Sprintf("/var/tmp/w%04d", i)
		fs[p] = KindFile
		src.WriteString(p + "\n")
	}
	src.WriteString("[connect]\nallow 127.0.0.1:5432\n[bind]\nallow 0\n")
	p := mustParse(b, src.String())
	b.ReportAllocs()
	for b.Loop() {
		rs, err := Compile(p, landlock.ABITable[7], false, fs.stat)
		if err != nil || rs.Rules() != 2002 {
			b.Fatalf("Compile = %v rules, %v", rs.Rules(), err)
		}
	}
	b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "paths/s")
}

// BenchmarkRunTrue measures Run of /usr/bin/true under a small policy from
// this process: the re-executed enforcer child (a second Go start-up),
// then the command.
func BenchmarkRunTrue(b *testing.B) {
	p := mustParse(b, baseRules)
	b.ReportAllocs()
	for b.Loop() {
		status, err := Run(b.Context(), Options{Policy: p, Command: []string{"/usr/bin/true"}, Quiet: true})
		if status != 0 || err != nil {
			b.Fatalf("Run = %d, %v", status, err)
		}
	}
}

// BenchmarkPrepareBases prepares the shipped bases (bases/*.cfg, about 100
// rows) on this machine: Compile's stats and resolvePathRules' walk of
// every row, the parent's work before any child starts.
func BenchmarkPrepareBases(b *testing.B) {
	p, err := policy.Load("../bases", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Prepare(Options{Policy: p}); err != nil {
			b.Fatal(err)
		}
	}
}
