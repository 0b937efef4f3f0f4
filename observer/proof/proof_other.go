//go:build !linux

package proof

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"
)

// Options configures Run; see the Linux documentation.
type Options struct {
	WantRelease string
	WantABI     int
	Exe, Dir    string
	Raw         io.Writer
	Wait        time.Duration
	PortBase    int
	Log         *slog.Logger
}

// Role is the LOCKSTEP_ROLE value of the refusal child.
const Role = "proof-refusal"

// Run needs Linux.
func Run(ctx context.Context, opts Options) (*Report, error) {
	return nil, errors.New("proof: the kernel proof needs Linux")
}

// RefusalMain needs Linux.
func RefusalMain() int { return 2 }

// CaptureOptions configures Capture; see the Linux documentation.
type CaptureOptions struct {
	Out, Exe, Dir string
	PortBase      int
	Wait          time.Duration
}

// Capture needs Linux.
func Capture(ctx context.Context, opts CaptureOptions) error {
	return errors.New("proof: capturing audit records needs Linux")
}

// RunScenarios needs Linux.
func RunScenarios(ctx context.Context, opts CaptureOptions) error {
	return errors.New("proof: the refusal scenarios need Linux")
}
