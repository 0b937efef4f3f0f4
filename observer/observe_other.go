//go:build !linux

package observer

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ProbeRole is the LOCKSTEP_ROLE value of the containment probe child.
const ProbeRole = "observer-probe"

// Run needs Linux (Landlock, audit over netlink).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	return nil, errors.New("observe: the observer runs on Linux only")
}

// ProbeMain needs Linux.
func ProbeMain() int {
	fmt.Fprintln(os.Stderr, "observer probe: Linux only")
	return 2
}
