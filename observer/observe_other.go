//go:build !linux

package observer

import (
	"context"
	"errors"
)

// Run needs Linux (Landlock, audit over netlink).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	return nil, errors.New("observe: the observer runs on Linux only")
}
