package harness

import (
	"github.com/lockstep-sandbox/lockstep/internal/machine"

	"context"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Pool runs several guests at once, bounded by host CPUs and memory: a
// guest starts only when its vCPUs fit in the CPUs left and its memory in
// three quarters of the memory available when the pool was made. Every
// guest has its own temp dir, sockets and QEMU process (nothing is shared
// by name or port).
type Pool struct {
	cpus, mem       *semaphore.Weighted
	maxCPUs, maxMem int64
}

// NewPool makes a pool for up to maxGuests guests at once (0: as many as
// the host's CPUs allow).
func NewPool(maxGuests int) *Pool {
	cpus := int64(runtime.NumCPU())
	if maxGuests > 0 && int64(maxGuests) < cpus {
		cpus = int64(maxGuests)
	}
	mem := availableMemMB() * 3 / 4
	if mem < 128 {
		mem = 128
	}
	return &Pool{cpus: semaphore.NewWeighted(cpus), mem: semaphore.NewWeighted(mem), maxCPUs: cpus, maxMem: mem}
}

// availableMemMB is MemAvailable in MiB (1024 if unknown).
func availableMemMB() int64 {
	if mb, ok := machine.MeminfoMB("MemAvailable")["MemAvailable"]; ok {
		return mb
	}
	return 1024
}

// Run waits for room, then runs one guest (see the package-level Run).
func (p *Pool) Run(ctx context.Context, o Options) (*Result, error) {
	cpus, mem := int64(max(o.CPUs, 1)), int64(o.MemMB)
	if mem == 0 {
		mem = defaultMemMB
	}
	// A guest wider than the pool still runs, alone.
	cpus, mem = min(cpus, p.maxCPUs), min(mem, p.maxMem)
	if err := p.cpus.Acquire(ctx, cpus); err != nil {
		return nil, fmt.Errorf("waiting for CPUs: %w", err)
	}
	defer p.cpus.Release(cpus)
	if err := p.mem.Acquire(ctx, mem); err != nil {
		return nil, fmt.Errorf("waiting for memory: %w", err)
	}
	defer p.mem.Release(mem)
	return Run(ctx, o)
}

// RunAll runs every guest through the pool and returns their results and
// errors in order.
func (p *Pool) RunAll(ctx context.Context, opts []Options) ([]*Result, []error) {
	results := make([]*Result, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = p.Run(ctx, o)
		}()
	}
	wg.Wait()
	return results, errs
}
