//go:build !linux

package observer

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ProbeArgs is the argv of a containment probe child.
func ProbeArgs(op, arg string) []string {
	return []string{"observe", "--probe", op, "--probe-arg", arg}
}

// Run needs Linux (Landlock, audit over netlink).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	return nil, errors.New("observe: the observer runs on Linux only")
}

// ProbeMain needs Linux.
func ProbeMain(op, arg string) int {
	fmt.Fprintln(os.Stderr, "observer probe: Linux only")
	return 2
}
