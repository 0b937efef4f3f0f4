//go:build linux

package verify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// Guest paths of the host's inputs.
const (
	guestExercises = proto.ShareDir + "/exercises"
	guestPolicy    = proto.ShareDir + "/verify"
)

// Kernel is one row of the matrix.
type Kernel struct {
	// Name is the kernel as named (a pin or a file); BzImage the kernel to
	// boot; Pin the pin it was built from ("" for a file); ABI the pin's
	// Landlock ABI (0 unknown).
	Name, BzImage, Pin string
	ABI                int
	// Boot is the kernel's modules and machine (a distribution kernel's).
	Boot harness.Boot
}

// HostOptions configures Host.
type HostOptions struct {
	Policy *policy.Policy
	// Policies are the files the policy came from (provenance only).
	Policies []string
	// Layers are further policies the cells they apply to combine after
	// Policy (an exercise's limits, its ABI-10 rows on kernels that
	// enforce them).
	Layers  []Layer
	Kernels []Kernel
	// Exercises is the testing root, Key the key; Only, if not empty,
	// keeps just the exercises named.
	Exercises, Key string
	Only           []string
	// JointRuns: 0 is DefaultJointRuns.
	JointRuns int
	// TCGTimeFactor is each guest's time factor under TCG
	// (GuestOptions.TCGTimeFactor); 0 is harness.DefaultTCGTimeFactor.
	TCGTimeFactor int
	// Parallel bounds the guests at once; 0 is as many as the host's CPUs
	// allow (harness.NewPool), 1 runs them one after another.
	Parallel int
	// Pool, if not nil, is the pool the cells run through instead of one
	// of Parallel's: HostAll shares one between several matrices.
	Pool *harness.Pool
	// Exe is the guest's init and job binary; "" is this executable.
	Exe string
	// Sizing is each guest's (a BootTimeout of 0 is harness's, 6 s times
	// the accel factor, 60 s under TCG, which a loaded machine can pass).
	harness.Sizing
	// Progress receives one line per finished cell; Stderr the guests'
	// output (nil discards).
	Progress func(format string, args ...any)
	Stderr   io.Writer
	Verbose  bool
	Log      *slog.Logger
}

// setDefaults refuses options Host cannot verify with and fills in the zero
// fields that stand for a default.
func (opts *HostOptions) setDefaults() error {
	if opts.Policy == nil || len(opts.Kernels) == 0 || opts.Exercises == "" || opts.Key == "" {
		return fmt.Errorf("verify: a policy, kernels, exercises and a key are required")
	}
	var err error
	if opts.JointRuns, err = jointRuns(opts.JointRuns); err != nil {
		return err
	}
	if opts.Progress == nil {
		opts.Progress = func(string, ...any) {}
	}
	return nil
}

// Host is verify's host side: it verifies every exercise of the key on every
// kernel, a fresh guest per cell (running Guest), through a harness.Pool.
func Host(ctx context.Context, opts HostOptions) (*Result, error) {
	t0 := time.Now()
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	names, err := exerciseNames(opts)
	if err != nil {
		return nil, err
	}
	res := &Result{Schema: ResultSchema, Key: opts.Key, PolicyHash: opts.Policy.Hash(), Policies: opts.Policies, Parallel: opts.Parallel,
		Exercises: names}
	exAbs, err := filepath.Abs(opts.Exercises)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockstep-verify.")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer os.RemoveAll(dir)
	share := filepath.Join(dir, "policy")
	if err := os.Mkdir(share, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(share, "policy.cfg"), opts.Policy.Render(), 0o644); err != nil {
		return nil, err
	}
	for i, l := range opts.Layers {
		if err := os.WriteFile(filepath.Join(share, layerFile(i)), l.Policy.Render(), 0o644); err != nil {
			return nil, err
		}
	}
	runs, err := guestRuns(opts, res, dir, exAbs, share)
	if err != nil {
		return nil, err
	}
	runCells(ctx, opts, res, runs)
	for _, c := range res.Cells {
		if c.Guest != nil {
			res.GuestSeconds += c.Guest.Timings.Total.Seconds()
		}
	}
	for ki := range res.Kernels {
		for ei := range res.Exercises {
			if c := res.Cell(ki, ei); res.Kernels[ki].ABI == 0 && c.ABI > 0 {
				res.Kernels[ki].ABI = c.ABI
			}
		}
	}
	res.Status = status(res.Cells)
	res.WallSeconds = time.Since(t0).Seconds()
	return res, nil
}

// exerciseNames are the names of the key's exercises, opts.Only's if given.
func exerciseNames(opts HostOptions) ([]string, error) {
	found, err := exercise.ForKey(opts.Exercises, opts.Key)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("verify: no exercise for key %q under %s", opts.Key, opts.Exercises)
	}
	if found, err = exercise.Named(found, opts.Only...); err != nil {
		return nil, fmt.Errorf("verify: %w (under %s)", err, opts.Exercises)
	}
	var names []string
	for _, f := range found {
		names = append(names, f.Name)
	}
	return names, nil
}

// guestRuns lists the kernels in res and returns one guest run per cell,
// kernel by kernel, each with its results directory under dir; the guest
// sees the exercises (exAbs) and the policy (share) read-only.
func guestRuns(opts HostOptions, res *Result, dir, exAbs, share string) ([]harness.Options, error) {
	var runs []harness.Options
	shares := []harness.Share{{Source: exAbs, GuestPath: guestExercises}, {Source: share, GuestPath: guestPolicy}}
	for ki, k := range opts.Kernels {
		res.Kernels = append(res.Kernels, KernelInfo{Name: k.Name, Pin: k.Pin, BzImage: k.BzImage, ABI: k.ABI})
		for ei, ex := range res.Exercises {
			results := filepath.Join(dir, fmt.Sprintf("results-%d-%d", ki, ei))
			if err := os.Mkdir(results, 0o755); err != nil {
				return nil, err
			}
			run, err := guestRun(opts, k, ex, results, shares)
			if err != nil {
				return nil, err
			}
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// guestRun is the guest run of one cell: kernel k, exercise ex, results
// written to the host directory results, the inputs shared as shares.
func guestRun(opts HostOptions, k Kernel, ex, results string, shares []harness.Share) (harness.Options, error) {
	run := harness.Options{Kernel: k.BzImage, Init: opts.Exe, ResultsDir: results, Shares: shares,
		ForensicsDir: harness.TempForensicsDir(results), Stdout: opts.Stderr, Stderr: opts.Stderr, Verbose: opts.Verbose, Log: opts.Log}
	opts.Sizing.Apply(&run)
	k.Boot.Apply(&run)
	run.CPUs = max(run.CPUs, 1)
	configs := []string{guestPolicy + "/policy.cfg"}
	for i, l := range opts.Layers {
		if l.applies(k, ex) {
			configs = append(configs, guestPolicy+"/"+layerFile(i))
		}
	}
	err := run.SetRole(GuestRole, GuestOptions{Kernel: k.Name, Configs: configs,
		Exercises: guestExercises, Key: opts.Key, Exercise: ex, JointRuns: opts.JointRuns, TCGTimeFactor: opts.TCGTimeFactor, Out: proto.ResultsDir})
	if err != nil {
		return run, fmt.Errorf("verify: %w", err)
	}
	return run, nil
}

// layerFile is the shared file name of opts.Layers[i].
func layerFile(i int) string { return fmt.Sprintf("layer-%d.cfg", i) }

// layerNames are the files of the layers the cell of k and ex combines.
func layerNames(layers []Layer, k Kernel, ex string) []string {
	var out []string
	for _, l := range layers {
		if l.applies(k, ex) {
			out = append(out, l.File)
		}
	}
	return out
}

// runCells boots the guests through a pool and fills res.Cells, reporting
// each cell as it finishes.
func runCells(ctx context.Context, opts HostOptions, res *Result, runs []harness.Options) {
	pool := opts.Pool
	if pool == nil {
		pool = harness.NewPool(opts.Parallel)
	}
	res.Cells = make([]*Cell, len(runs))
	done := make(chan int, len(runs))
	for i := range runs {
		go func() {
			run, err := pool.Run(ctx, runs[i])
			c := cellOf(runs[i].ResultsDir, res, i, run, err)
			c.Layers = layerNames(opts.Layers, opts.Kernels[i/len(res.Exercises)], c.Exercise)
			res.Cells[i] = c
			done <- i
		}()
	}
	for range runs {
		i := <-done
		c := res.Cells[i]
		opts.Progress("%s × %s: %s%s", c.Kernel, c.Exercise, strings.TrimSpace(c.Verdict+" "+c.Why), factorNote(c.TimeFactor))
	}
}

// factorNote is " (time limits ×N under TCG)" for a factor above 1.
func factorNote(factor int) string {
	if n := engine.FactorNote(factor); n != "" {
		return " (" + n + ")"
	}
	return ""
}

// cellOf reads a guest's cell, or makes an indeterminate one saying why
// there is none.
func cellOf(results string, res *Result, i int, run *harness.Result, err error) *Cell {
	k, e := res.Kernels[i/len(res.Exercises)], res.Exercises[i%len(res.Exercises)]
	c, rerr := ReadCell(filepath.Join(results, CellFile))
	if rerr != nil {
		c = &Cell{Schema: CellSchema, Kernel: k.Name, Exercise: e, Verdict: Indeterminate, ABI: k.ABI}
		switch {
		case err != nil:
			c.Why = fmt.Sprintf("the guest did not report: %v", err)
		default:
			c.Why = fmt.Sprintf("the guest exited %d without a cell: %v", run.Status, rerr)
		}
		if run != nil && len(run.OOMKills) > 0 {
			// The cause, when the guest's OOM killer took the job.
			c.Why += "; the guest's OOM killer ran: " + strings.Join(run.OOMKills, "; ")
		}
		if run != nil && run.Signaled != "" {
			// What the guest looked like when the job died by a signal.
			c.Why += "; PID 1 saw: " + run.Signaled
		}
		if run != nil && len(run.ConsoleTail) > 0 {
			c.Console = run.ConsoleTail[max(0, len(run.ConsoleTail)-10):]
		}
	} else if err != nil && c.Verdict == Pass {
		c.Verdict, c.Why = Indeterminate, fmt.Sprintf("the guest failed after reporting: %v", err)
	} else if run != nil && run.Status != 0 && c.Verdict == Pass {
		// The role exits 0 once its cell is written: a pass beside
		// another status was not written by a role that ended well.
		c.Verdict, c.Why = Indeterminate, fmt.Sprintf("the guest exited %d after writing a passing cell", run.Status)
	}
	if run != nil {
		c.Guest = harness.NewGuestInfo(k.Pin, k.BzImage, run)
	}
	c.normalise()
	return c
}
