package orchestrate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeExercises writes n exercises of about rows rows each for language
// "java" into dir, with records that vouch for them. Two thirds of each
// exercise's paths are shared by every exercise (the JDK, /proc, /sys), the
// rest are its own, as real prunes of one language look.
func writeExercises(tb testing.TB, dir string, n, rows int) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	shared := rows * 2 / 3
	for e := 0; e < n; e++ {
		var b strings.Builder
		b.WriteString("# Pruned by the phobos layer pruner for java/ex" + fmt.Sprint(e) + ", stage all.\n\n[read]\n")
		for i := 0; i < shared; i++ {
			fmt.Fprintf(&b, "/usr/lib/jvm/java-17-openjdk-amd64/lib/m%03d/f%05d.jar\n", i%200, i)
		}
		own := rows - shared - 3
		for i := 0; i < own; i++ {
			fmt.Fprintf(&b, "/var/tmp/testing-dir/ex%02d/src/p%03d/C%05d.java\n", e, i%100, i)
		}
		b.WriteString("\n[write]\n/tmp\n\n[create]\n/tmp\n\n[connect]\nallow 127.0.0.1:*\n\n[limits]\ntimeout=" + fmt.Sprint(60+e) + "\n")
		cfg := b.String()
		stem := fmt.Sprintf("java_ex%02d", e)
		rec := fmt.Sprintf(`{"schema_version": 2, "key": "java", "exercise": "ex%02d", "stage": "all", "cfg_sha256": %q}`, e, sha([]byte(cfg)))
		if err := os.WriteFile(filepath.Join(dir, stem+".cfg"), []byte(cfg), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, stem+".json"), []byte(rec), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkMerge50x2000 merges 50 exercises of 2,000 rows each, checks,
// renders and writes the tree (fsync included), and reports ms per merge.
func BenchmarkMerge50x2000(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "path_sets")
	writeExercises(b, path, 50, 2000)
	o := Options{Langs: []string{"java"}, PathDir: path, CoreDir: filepath.Join(dir, "core")}
	sum, err := Run(o)
	if err != nil {
		b.Fatal(err)
	}
	if len(sum.Languages[0].Exercises) != 50 || sum.Languages[0].BaseRows < 50*600 {
		b.Fatalf("benchmark merge: %d exercises, base %d rows", len(sum.Languages[0].Exercises), sum.Languages[0].BaseRows)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Run(o); err != nil {
			b.Fatal(err)
		}
	}
	// Wall time depends on what else the machine runs; the process's CPU
	// time (user + system, all threads) does much less.
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/merge")
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/merge")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
