package guesttest

import (
	"context"
	"sync"

	"github.com/lockstep-sandbox/lockstep/kernel"
)

// PinnedKernel returns the default pin's verified bzImage, building it the
// first time a machine needs it (minutes); later calls reuse the answer.
var PinnedKernel = sync.OnceValues(func() (string, error) {
	return kernel.Path(context.Background(), kernel.DefaultPin, nil)
})
