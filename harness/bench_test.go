package harness

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"
)

// bootMedian boots `true` n times and returns the median boot-to-exit
// (Run's whole duration) and the last result.
func bootMedian(b *testing.B, o Options, n int) (time.Duration, *Result) {
	var all []time.Duration
	var last *Result
	for range n {
		start := time.Now()
		res, err := Run(b.Context(), o)
		if err != nil || res.Status != 0 {
			b.Fatalf("Run(true) = %+v, %v", res, err)
		}
		all = append(all, time.Since(start))
		last = res
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all[len(all)/2], last
}

// BenchmarkBootTrue reports the median of five boot-to-exit times of
// `true` in a guest of the pinned kernel on microvm (accel auto). With
// LOCKSTEP_REF_KERNEL (a distribution bzImage) and LOCKSTEP_REF_MODULES
// (its /lib/modules/<release>) it also boots that kernel on q35 with
// SeaBIOS in the same run and reports the ratio ours/reference.
func BenchmarkBootTrue(b *testing.B) {
	bz, err := guesttest.PinnedKernel()
	if err != nil {
		b.Fatalf("kernel: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		// The first boot fills the accel verdict and initramfs caches.
		if _, err := Run(b.Context(), Options{Kernel: bz, Command: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		ours, last := bootMedian(b, Options{Kernel: bz, Command: []string{"true"}}, 5)
		b.ReportMetric(float64(ours.Milliseconds()), "median-ms")
		b.ReportMetric(float64(last.Timings.Boot.Milliseconds()), "boot-ms")
		b.ReportMetric(float64(last.Timings.Initramfs.Microseconds())/1000, "initramfs-ms")
		refKernel, refMods := os.Getenv("LOCKSTEP_REF_KERNEL"), os.Getenv("LOCKSTEP_REF_MODULES")
		if refKernel == "" {
			continue
		}
		mods, err := ResolveModules(refMods, GuestModules)
		if err != nil {
			b.Fatalf("reference modules: %v", err)
		}
		ref, _ := bootMedian(b, Options{Kernel: filepath.Clean(refKernel), Machine: MachineQ35, Modules: mods,
			Command: []string{"true"}, BootTimeout: 5 * time.Minute}, 5)
		b.ReportMetric(float64(ref.Milliseconds()), "ref-median-ms")
		b.ReportMetric(float64(ours)/float64(ref), "x-ref")
	}
}
