//go:build !linux

package kernel

import (
	"context"
	"errors"
	"log/slog"
)

func lockFile(ctx context.Context, path string, log *slog.Logger) (func(), error) {
	return nil, errors.New("kernel builds need Linux (flock)")
}

func lockHeld(path string) bool { return false }
