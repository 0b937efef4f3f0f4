//go:build linux

package repro

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// guestPolicyDir is where a guest side finds the policy.
const guestPolicyDir = proto.ShareDir + "/repro"

// Kernel is one side of a comparison.
type Kernel struct {
	// Name is the kernel as the user named it: HostKernel, a pin, a file.
	Name string
	// BzImage is the kernel to boot; "" runs on this machine's kernel
	// (Name must then be HostKernel).
	BzImage string
	// Pin is the pin BzImage was built from ("" for a file).
	Pin string
	// Boot is the kernel's modules and machine (a distribution kernel's).
	Boot harness.Boot
}

// HostOptions configures Host.
type HostOptions struct {
	Kernels [2]Kernel
	Policy  *policy.Policy
	Command []string
	// Exe is the lockstep binary: the host side's `run`, and the guest's
	// init; "" is this executable.
	Exe string
	// Dir is the command's working directory on both sides; "" is the
	// current directory (in a guest: if its root has it, else /).
	Dir string
	// Sizing is each guest's (a BootTimeout of 0 is harness's, 6 s times
	// the accel factor, 60 s under TCG, which a loaded machine can pass).
	harness.Sizing
	// Wait bounds the wait for domain deallocation records; 0 is
	// engine.DefaultWait.
	Wait time.Duration
	// Stderr receives the guests' progress; nil discards it.
	Stderr  io.Writer
	Verbose bool
	// Log receives a progress line (info) as each side starts and ends,
	// the harness's lines of each guest, and warnings; nil discards them.
	Log *slog.Logger
}

// Host is repro's host side: it observes the command on both kernels at
// once (a guest each, running Guest; the host in-process) and compares what
// they refused.
func Host(ctx context.Context, opts HostOptions) (*Result, error) {
	if opts.Policy == nil || len(opts.Command) == 0 {
		return nil, fmt.Errorf("repro: a policy and a command are required")
	}
	if opts.Dir == "" {
		opts.Dir, _ = os.Getwd()
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	for _, k := range opts.Kernels {
		if k.BzImage == "" && k.Name != HostKernel {
			return nil, fmt.Errorf("repro: kernel %q has no bzImage", k.Name)
		}
	}
	if opts.Kernels[0].BzImage == "" && opts.Kernels[1].BzImage == "" {
		// Two host sides would fight over the audit daemon slot.
		a, err := observeSide(ctx, opts, opts.Kernels[0])
		if err != nil {
			return nil, err
		}
		b, err := observeSide(ctx, opts, opts.Kernels[1])
		if err != nil {
			return nil, err
		}
		return finish(opts, a, b), nil
	}
	var obs [2]*Side
	var errs [2]error
	var wg sync.WaitGroup
	for i, k := range opts.Kernels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obs[i], errs[i] = observeSide(ctx, opts, k)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return finish(opts, obs[0], obs[1]), nil
}

func finish(opts HostOptions, a, b *Side) *Result {
	res := Compare(a.Observation, b.Observation)
	res.Kernels[0].Guest, res.Kernels[1].Guest = a.Guest, b.Guest
	res.Command, res.PolicyHash = opts.Command, opts.Policy.Hash()
	return res
}

// observeSide observes the command on k, with a progress line as it
// starts and one as it ends: a side can take minutes (a guest under TCG).
func observeSide(ctx context.Context, opts HostOptions, k Kernel) (*Side, error) {
	o := &Side{}
	var err error
	if k.BzImage == "" {
		opts.Log.Info(k.Name + ": observing the command on this machine's kernel")
		o.Observation, err = engine.ObserveHere(ctx, engine.HereOptions{Kernel: k.Name, Policy: opts.Policy, Command: opts.Command, Exe: opts.Exe,
			Dir: opts.Dir, Wait: opts.Wait, Log: opts.Log})
	} else {
		opts.Log.Info(k.Name + ": observing the command in a guest")
		o, err = observeGuest(ctx, opts, k)
	}
	switch {
	case err != nil:
	case o.Indeterminate != "":
		opts.Log.Info(k.Name + ": indeterminate: " + o.Indeterminate)
	default:
		opts.Log.Info(fmt.Sprintf("%s: observed: status %d, %d refusal(s)", k.Name, o.Status, len(o.Refusals)))
	}
	return o, err
}

// observeGuest boots k with repro's guest side (GuestRole) as the job and
// reads its observation from the results. A guest that does not report is
// an indeterminate observation, not an error.
func observeGuest(ctx context.Context, opts HostOptions, k Kernel) (*Side, error) {
	dir, err := os.MkdirTemp("", "lockstep-repro-guest.")
	if err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	defer os.RemoveAll(dir)
	share, results := filepath.Join(dir, "share"), filepath.Join(dir, "results")
	for _, d := range []string{share, results} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("repro: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(share, "policy.cfg"), opts.Policy.Render(), 0o644); err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	hopts := harness.Options{Kernel: k.BzImage, Shares: []harness.Share{{Source: share, GuestPath: guestPolicyDir}},
		Dir: opts.Dir, Init: opts.Exe, Stdout: opts.Stderr, Stderr: opts.Stderr, ResultsDir: results,
		ForensicsDir: harness.TempForensicsDir(dir), Verbose: opts.Verbose, Log: opts.Log}
	opts.Sizing.Apply(&hopts)
	k.Boot.Apply(&hopts)
	// A negative wait was never handed to a guest: the default holds there.
	if err := hopts.SetRole(GuestRole, GuestOptions{Kernel: k.Name, Configs: []string{guestPolicyDir + "/policy.cfg"},
		Command: opts.Command, Wait: max(opts.Wait, 0), Out: proto.ResultsDir}); err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	run, err := harness.Run(ctx, hopts)
	o, rerr := engine.ReadObservation(filepath.Join(results, ObservationFile))
	if rerr != nil {
		o = &engine.Observation{Schema: engine.ObservationSchema, Kernel: k.Name}
		switch {
		case err != nil:
			o.Indeterminate = fmt.Sprintf("the guest did not report: %v", err)
		default:
			o.Indeterminate = fmt.Sprintf("the guest exited %d without an observation: %v", run.Status, rerr)
		}
		if run != nil && len(run.ConsoleTail) > 0 {
			o.Stderr = run.ConsoleTail[max(0, len(run.ConsoleTail)-10):]
		}
		o.Normalise()
	} else if err != nil && o.Indeterminate == "" {
		o.Indeterminate = fmt.Sprintf("the guest run failed after reporting: %v", err)
	}
	side := &Side{Observation: o}
	if run != nil {
		side.Guest = harness.NewGuestInfo(k.Pin, k.BzImage, run)
	}
	return side, nil
}
