package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"
)

// bootMedian boots `true` n times and returns the medians of the
// boot-to-exit wall time (Run's whole duration) and of QEMU's CPU time, and
// the last result.
func bootMedian(b *testing.B, o Options, n int) (wall, cpu time.Duration, last *Result) {
	var walls, cpus []time.Duration
	for range n {
		start := time.Now()
		res, err := Run(b.Context(), o)
		if err != nil || res.Status != 0 {
			b.Fatalf("Run(true) = %+v, %v", res, err)
		}
		walls = append(walls, time.Since(start))
		cpus = append(cpus, res.Timings.QEMUCPU)
		last = res
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	return median(walls), median(cpus), last
}

// refRootImage makes the reference layout's root disk as Phobos does: a
// directory tree put into a raw ext4 image at mkfs time (mkfs.ext4 -d, no
// loop mount). The tree holds /usr/bin/true and the libraries it loads.
func refRootImage(b *testing.B) string {
	dir := b.TempDir()
	tree := filepath.Join(dir, "root")
	files := []string{"/usr/bin/true"}
	out, err := exec.Command("ldd", "/usr/bin/true").Output()
	if err != nil {
		b.Fatalf("ldd /usr/bin/true: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			files = append(files, f)
		}
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			b.Fatal(err)
		}
		data, err := os.ReadFile(real)
		if err != nil {
			b.Fatal(err)
		}
		dst := filepath.Join(tree, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	// /bin, /lib, /lib64 as a merged-/usr root has them.
	for _, l := range []string{"bin", "lib", "lib64"} {
		if _, err := os.Stat(filepath.Join(tree, "usr", l)); err == nil {
			os.Symlink("usr/"+l, filepath.Join(tree, l))
		}
	}
	img := filepath.Join(dir, "root.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-i", "8192", "-d", tree, img, "64M").CombinedOutput(); err != nil {
		b.Fatalf("mkfs.ext4 -d: %v\n%s", err, out)
	}
	return img
}

// BenchmarkBootTrue reports the median of five boot-to-exit times of
// `true` in a guest of the pinned kernel on microvm (accel auto). With
// LOCKSTEP_REF_KERNEL (a distribution bzImage) and LOCKSTEP_REF_MODULES
// (its /lib/modules/<release>) it also boots that kernel on q35 with
// SeaBIOS with an ext4 root image (the layout Phobos boots, with the
// distribution kernel's virtio-blk and ext4 modules) in the same run and
// reports the ratio ours/reference.
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
		ours, oursCPU, last := bootMedian(b, Options{Kernel: bz, Command: []string{"true"}}, 5)
		b.ReportMetric(float64(ours.Milliseconds()), "median-ms")
		b.ReportMetric(float64(oursCPU.Milliseconds()), "qemu-cpu-ms")
		b.ReportMetric(float64(last.Timings.Boot.Milliseconds()), "boot-ms")
		b.ReportMetric(float64(last.Timings.Initramfs.Microseconds())/1000, "initramfs-ms")
		refKernel, refMods := os.Getenv("LOCKSTEP_REF_KERNEL"), os.Getenv("LOCKSTEP_REF_MODULES")
		if refKernel == "" {
			continue
		}
		mods, err := ResolveModules(refMods, append(slices.Clip(GuestModules), RootImageModules...))
		if err != nil {
			b.Fatalf("reference modules: %v", err)
		}
		ref, refCPU, _ := bootMedian(b, Options{Kernel: filepath.Clean(refKernel), Machine: MachineQ35, Modules: mods,
			RootImage: refRootImage(b), Command: []string{"true"}, BootTimeout: 5 * time.Minute}, 5)
		b.ReportMetric(float64(ref.Milliseconds()), "ref-median-ms")
		b.ReportMetric(float64(refCPU.Milliseconds()), "ref-qemu-cpu-ms")
		b.ReportMetric(float64(ref)/float64(ours), "x-faster-wall")
		b.ReportMetric(float64(refCPU)/float64(oursCPU), "x-faster-cpu")
	}
}
