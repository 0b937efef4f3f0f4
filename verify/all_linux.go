//go:build linux

package verify

import (
	"context"
	"sync"

	"github.com/lockstep-sandbox/lockstep/harness"
)

// HostAll verifies several matrices (one per base of a base directory) with
// every cell of every one in one pool of up to parallel guests (0: as many
// as the host's CPUs allow). Run one after another, each matrix's slowest
// cell would end it alone while the other CPUs idle; in one pool the next
// matrix's cells fill them. The results come back in the order of all; each
// one's WallSeconds counts from the common start. The first matrix that
// cannot start (a missing exercise, an unwritable temporary directory)
// cancels the others and is the error.
func HostAll(ctx context.Context, parallel int, all []HostOptions) ([]*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pool := harness.NewPool(parallel)
	results := make([]*Result, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i := range all {
		opts := all[i]
		opts.Pool, opts.Parallel = pool, parallel
		wg.Add(1)
		go func() {
			defer wg.Done()
			if results[i], errs[i] = Host(ctx, opts); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		// Host fails only before its guests start; the matrices it
		// cancelled return their cells as indeterminate, not an error.
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}
