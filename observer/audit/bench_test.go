package audit

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user+system CPU time: on a shared machine the
// wall-clock rate depends on the load, the CPU rate much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds records/s (wall clock) and records/cpu-s.
func report(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "records/cpu-s")
}

// Benchmarks parse the real host captures (testdata/audit/linux-7.2.13-guest)
// and report records per second; the goal is at least 1M records/s.

func benchLines(b *testing.B, path string) []string {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func BenchmarkParseNetlink(b *testing.B) {
	type msg struct {
		typ  uint16
		body []byte
	}
	var msgs []msg
	for _, l := range benchLines(b, "../../testdata/audit/linux-7.2.13-guest/netlink.txt") {
		typ, body, _ := strings.Cut(l, " ")
		v, _ := strconv.ParseUint(typ, 10, 16)
		msgs = append(msgs, msg{uint16(v), []byte(body)})
	}
	b.ReportAllocs()
	n, cpu0 := 0, cpuTime()
	for b.Loop() {
		m := msgs[n%len(msgs)]
		if _, err := ParseNetlink(m.typ, m.body); err != nil {
			b.Fatal(err)
		}
		n++
	}
	report(b, n, cpu0)
}

func benchParseLine(b *testing.B, path string) {
	lines := benchLines(b, path)
	b.ReportAllocs()
	n, cpu0 := 0, cpuTime()
	for b.Loop() {
		if _, err := ParseLine(lines[n%len(lines)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	report(b, n, cpu0)
}

func BenchmarkParseKmsg(b *testing.B) {
	benchParseLine(b, "../../testdata/audit/linux-7.2.13-guest/kmsg.txt")
}

func BenchmarkParseDmesg(b *testing.B) {
	benchParseLine(b, "../../testdata/audit/linux-7.2.13-guest/dmesg.txt")
}

// BenchmarkParseAccess parses and decodes the LANDLOCK_ACCESS records alone,
// as the collector does for each denial.
func BenchmarkParseAccess(b *testing.B) {
	var lines []string
	for _, l := range benchLines(b, "../../testdata/audit/linux-7.2.13-guest/kmsg.txt") {
		if strings.Contains(l, "type=1423 ") {
			lines = append(lines, l)
		}
	}
	b.ReportAllocs()
	n, cpu0 := 0, cpuTime()
	for b.Loop() {
		r, err := ParseLine(lines[n%len(lines)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Access(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	report(b, n, cpu0)
}
