package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	err := Options{Root: "/no/such/dir", Accel: "xen", MemMB: -1, Shares: []Share{{Source: "/no/share", GuestPath: "rel"}}}.validate()
	if err == nil {
		t.Fatal("validate() of bad options succeeded")
	}
	for _, want := range []string{"no kernel", "no command", "root /no/such/dir", "share /no/share: want an existing", "guest path \"rel\"", "accel \"xen\"", "negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate() error lacks %q:\n%v", want, err)
		}
	}
	if _, err := Run(t.Context(), Options{}); err == nil {
		t.Error("Run(Options{}) succeeded")
	}
}

func TestAccelFactor(t *testing.T) {
	if AccelFactor(AccelTCG) != 10 || AccelFactor(AccelKVM) != 1 {
		t.Errorf("AccelFactor(tcg, kvm) = %d, %d; want 10, 1", AccelFactor(AccelTCG), AccelFactor(AccelKVM))
	}
}

func TestPoolBounds(t *testing.T) {
	p := NewPool(1)
	if p.maxCPUs != 1 {
		t.Errorf("NewPool(1) allows %d CPUs, want 1", p.maxCPUs)
	}
	if p.maxMem < 128 {
		t.Errorf("NewPool memory bound %d MiB", p.maxMem)
	}
	// With the only CPU taken, a second guest waits and gives up with its
	// context, never booting.
	if err := p.cpus.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	defer p.cpus.Release(1)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	res, err := p.Run(ctx, Options{Kernel: filepath.Join(t.TempDir(), "never-read"), Command: []string{"true"}})
	if res != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Pool.Run with no CPU free = %v, %v; want a context deadline error", res, err)
	}
}

func TestAvailableMem(t *testing.T) {
	if m := availableMemMB(); m <= 0 {
		t.Errorf("availableMemMB() = %d", m)
	}
}

// TestStoreVerdictConcurrent stores verdicts from many goroutines at once,
// as a pool's guests may: the file stays valid JSON and keeps every key.
func TestStoreVerdictConcurrent(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- storeVerdict(Verdict{Schema: verdictSchema, HostKernel: fmt.Sprintf("k%d", i), QEMUVersion: "q", Reason: "test"})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 16 {
		if _, ok, err := cachedVerdict(fmt.Sprintf("k%d", i), "q"); err != nil || !ok {
			t.Errorf("verdict k%d: ok %v, err %v; want every concurrent store kept", i, ok, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(CacheDir(), "accel.json.*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestKVMCPU: a KVM guest's CPU model is the one asked for (Options.CPU,
// then $LOCKSTEP_CPU), else the probe's, whose reason for passing over
// host the accelerator's reason repeats.
func TestKVMCPU(t *testing.T) {
	v := Verdict{KVMUsable: true, CPU: "host,-xsave", CPUReason: "-cpu host: a guest under kvm exited without its status line"}
	for _, tc := range []struct {
		name, asked, env, want, why string
	}{
		{"the probe's", "", "", "host,-xsave", "-cpu host: a guest"},
		{"the environment's", "", "EPYC", "EPYC", "cpu EPYC asked for"},
		{"the option's over the environment's", "qemu64", "EPYC", "qemu64", "cpu qemu64 asked for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(CPUEnv, tc.env)
			cpu, why := kvmCPU(&Options{CPU: tc.asked}, v)
			if cpu != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("kvmCPU = %q, %q; want %q and a reason with %q", cpu, why, tc.want, tc.why)
			}
		})
	}
}

// TestTempForensicsDir: forensics of runs in different temporary
// directories go to different directories under the cache.
func TestTempForensicsDir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	fa, fb := TempForensicsDir(a), TempForensicsDir(b)
	if fa == fb {
		t.Errorf("TempForensicsDir(%s) = TempForensicsDir(%s) = %s", a, b, fa)
	}
	for _, f := range []string{fa, fb} {
		if filepath.Dir(f) != filepath.Join(CacheDir(), "forensics") {
			t.Errorf("%s is not directly under %s", f, filepath.Join(CacheDir(), "forensics"))
		}
	}
}
