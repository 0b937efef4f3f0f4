//go:build !linux

package observer

import (
	"context"
	"errors"
)

// Guest needs Linux (Landlock, audit over netlink).
func Guest(ctx context.Context, opts GuestOptions) (*Summary, error) {
	return nil, errors.New("observe: the observer runs on Linux only")
}
