package strace

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// readCapture returns a committed capture, decompressing .gz files.
func readCapture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("../../testdata/strace/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			tb.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

// BenchmarkParse measures parse throughput on a real capture (goal: at
// least 100 MB/s on one core).
func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"bench.strace.gz", "basic.strace"} {
		data := readCapture(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				p := NewParser(bytes.NewReader(data))
				n := 0
				for {
					_, err := p.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n == 0 {
					b.Fatal("no calls")
				}
			}
			// On a shared machine wall time understates the parser; MB per
			// second of this process's CPU time does not.
			if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
				b.ReportMetric(float64(len(data))*float64(b.N)/1e6/cpu, "MB/cpu-s")
			}
		})
	}
}
