//go:build linux

package repro

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// GuestRole is the registered role (proto.EnvRole) of repro's guest side:
// the job of each guest Run boots, reading its GuestOptions from the job
// (proto.OptionsFile).
const GuestRole = "repro-guest"

// GuestOptions configures Guest, one side observed on the running kernel;
// as JSON it is the job a guest side is handed.
type GuestOptions struct {
	// Kernel names the kernel in the observation.
	Kernel string `json:"kernel"`
	// BaseDir and Configs are the policy, combined as lockstep run combines
	// them (policy.Load).
	BaseDir string   `json:"base_dir,omitempty"`
	Configs []string `json:"configs"`
	// Policy, when set, is used instead of loading BaseDir and Configs.
	Policy  *policy.Policy `json:"-"`
	Command []string       `json:"command"`
	// Wait bounds the wait for domain deallocation records; 0 is
	// engine.DefaultWait.
	Wait time.Duration `json:"wait,omitempty"`
	// Out receives ObservationFile.
	Out string `json:"out"`
}

// Guest observes the command under the policy on the running kernel
// (engine.ObserveHere, in the current directory) and writes the
// observation to Out as ObservationFile.
func Guest(ctx context.Context, opts GuestOptions) (*engine.Observation, error) {
	p := opts.Policy
	if p == nil {
		var err error
		if p, err = policy.Load(opts.BaseDir, opts.Configs); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	o, err := engine.ObserveHere(ctx, engine.HereOptions{Kernel: opts.Kernel, Policy: p, Command: opts.Command, Wait: opts.Wait})
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	if err := safefile.WriteFile(filepath.Join(opts.Out, ObservationFile), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return o, nil
}
