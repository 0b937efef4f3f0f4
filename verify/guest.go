//go:build linux

package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// GuestRole is the registered role (proto.EnvRole) of verify's guest side:
// the job of each cell's guest, reading its GuestOptions from the job
// (proto.OptionsFile).
const GuestRole = "verify-guest"

// GuestOptions configures Guest, one cell on the running kernel; as JSON it
// is the job a cell's guest is handed.
type GuestOptions struct {
	// Kernel names the kernel in the cell.
	Kernel string `json:"kernel"`
	// Configs are the policy files, combined as lockstep run combines them.
	Configs []string `json:"configs"`
	// Exercises is the testing root; Key and Exercise select one exercise.
	Exercises string `json:"exercises"`
	Key       string `json:"key"`
	Exercise  string `json:"exercise"`
	// JointRuns: 0 is DefaultJointRuns.
	JointRuns int `json:"joint_runs,omitempty"`
	// TCGTimeFactor is the time factor under TCG (harness.TimeFactor); 0
	// is harness.DefaultTCGTimeFactor.
	TCGTimeFactor int `json:"tcg_time_factor,omitempty"`
	// Accel is the accelerator the guest runs under (proto.EnvAccel, set by
	// the guest's role from its environment); "" is none (the host).
	Accel string `json:"-"`
	// Out receives CellFile.
	Out string `json:"out"`
	// Progress receives one line per step; nil discards.
	Progress func(format string, args ...any) `json:"-"`
}

// Guest verifies one exercise on the running kernel (Here) and writes the
// cell to Out as CellFile.
func Guest(ctx context.Context, opts GuestOptions) (*Cell, error) {
	p, err := policy.Load("", opts.Configs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	c, err := Here(ctx, HereOptions{Kernel: opts.Kernel, Policy: p, Exercises: opts.Exercises, Key: opts.Key, Exercise: opts.Exercise,
		JointRuns: opts.JointRuns, TimeFactor: harness.TimeFactor(opts.Accel, opts.TCGTimeFactor), Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if err := safefile.WriteFile(filepath.Join(opts.Out, CellFile), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return c, nil
}
