//go:build linux

package verify

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// HereOptions configures Here, one cell on the running kernel.
type HereOptions struct {
	// Kernel names the kernel in the cell.
	Kernel string
	Policy *policy.Policy
	// Exercises is the testing root; Key and Exercise select one exercise.
	Exercises, Key, Exercise string
	// JointRuns: 0 is DefaultJointRuns.
	JointRuns int
	// Exe is the lockstep binary (`run`, the probes, the reference run's
	// role); "" is this executable. It is opened before the reference run
	// and executed through that descriptor (program), never again by a
	// path the reference run could have replaced.
	Exe string
	// WorkDir is the exercise's working directory; "" is
	// exercise.DefaultWorkDir.
	WorkDir string
	// RunTimeout bounds each run below the policy's own timeout limit
	// (engine.RunBound); with neither, the exercise package's default.
	RunTimeout time.Duration
	// TimeFactor multiplies the policy's timeout and cpu limits for the
	// reference, joint and diagnosis runs (harness.TimeFactor: a guest
	// under TCG runs several times slower than the machine that measured
	// them); the containment checks keep the policy's own. 0 is 1.
	TimeFactor int
	// Progress receives one line per step; nil discards.
	Progress func(format string, args ...any)
	Log      *slog.Logger

	// program is Exe, open (refns.Open); it is executed as runExe.
	program *os.File
	runExe  string
}

// Here verifies one exercise on the running kernel. The error is for
// failures to start at all; the outcome is in the cell.
func Here(ctx context.Context, opts HereOptions) (*Cell, error) {
	t0 := time.Now()
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer opts.program.Close()
	abi, err := enforcer.HostABI()
	if err != nil {
		return nil, fmt.Errorf("verify: Landlock ABI of the running kernel: %w", err)
	}
	c := &Cell{Schema: CellSchema, Kernel: opts.Kernel, Exercise: opts.Exercise, ABI: abi, Release: machine.Release()}
	defer func() { c.Seconds = time.Since(t0).Seconds(); c.normalise() }()
	ex, err := find(opts.Exercises, opts.Key, opts.Exercise)
	if err != nil {
		return nil, err
	}
	if c.unenforceable(opts.Policy) {
		return c, nil
	}
	// The containment's timeout check waits out the policy's own timeout
	// (up to the probe's cap): it waits beside the runs (contain.Early).
	early := contain.StartEarly(ctx, opts.Policy, containSetup(opts), contain.TimeoutCheck)
	defer early.Stop()
	timed := c.timed(opts, ex.Name)
	bound := engine.RunBound(timed, opts.RunTimeout)
	run := runner(ctx, ex, opts, bound)
	opts.Progress("%s: reference run", ex.Name)
	ref, err := run(nil)
	if err != nil {
		return nil, fmt.Errorf("verify: reference run: %w", err)
	}
	if c.noReference(ref, bound, opts.TimeFactor) {
		return c, nil
	}
	scratch, cfg, err := writePolicy(timed)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	held, err := c.jointRuns(opts, ex.Name, run, ref, cfg)
	if err != nil {
		return nil, err
	}
	if !held && c.onlyTimedOut() {
		c.Verdict, c.Why = Inconclusive, outOfTime("joint", bound, opts.TimeFactor)
		return c, nil
	}
	if !held {
		if err := c.diagnose(ctx, opts, timed, ex.Name, run); err != nil {
			return nil, err
		}
		return c, nil
	}
	if err := c.checkContainment(ctx, opts, ex.Name, early); err != nil {
		return nil, err
	}
	return c, nil
}

// timed is the policy of the exercise runs: opts.Policy with its timeout
// and cpu limits times opts.TimeFactor, which the cell records; the
// containment checks take opts.Policy.
func (c *Cell) timed(opts HereOptions, name string) *policy.Policy {
	if opts.TimeFactor <= 1 {
		return opts.Policy
	}
	c.TimeFactor = opts.TimeFactor
	opts.Progress("%s: time factor %d: the runs' timeout and cpu limits are the policy's ×%d (TCG); the containment checks keep the policy's own", name, opts.TimeFactor, opts.TimeFactor)
	return engine.Slowed(opts.Policy, opts.TimeFactor)
}

// noReference records the reference run and reports whether it is none:
// out of time (inconclusive) or unable to anchor the joint runs
// (indeterminate).
func (c *Cell) noReference(ref *exercise.Result, bound time.Duration, factor int) bool {
	c.Reference = oneLine(ref.Verdict)
	if ref.Verdict.ExitClass == verdict.Timeout {
		c.Verdict, c.Why = Inconclusive, outOfTime("reference", bound, factor)
		return true
	}
	if prob := ref.Verdict.ReferenceProblem(); prob != nil {
		c.Verdict, c.Why = Indeterminate, fmt.Sprintf("the reference run is no reference: %v", prob)
		return true
	}
	return false
}

// runner runs ex once per call, bounded by bound: under lockstep run the
// policy's timeout ends the command (124), and the runner's bound, a grace
// later, is the backstop. The reference run (no prefix), root with no
// sandbox, is isolated (exercise.Isolation): the guest's /run/lockstep (this
// program, its shares, its results) and the exercises are read-only to it,
// and nothing it starts outlives it.
func runner(ctx context.Context, ex *exercise.Exercise, opts HereOptions, bound time.Duration) runFunc {
	return func(prefix []string) (*exercise.Result, error) {
		ro := exercise.RunOptions{WorkDir: opts.WorkDir, Prefix: prefix, Timeout: bound, Log: opts.Log}
		if prefix != nil && bound != 0 {
			ro.Timeout += engine.PrefixGrace
		}
		if prefix == nil {
			ro.Isolate = &exercise.Isolation{Program: opts.program, ReadOnly: []string{proto.RunDir, opts.Exercises}}
		}
		return ex.Run(ctx, ro)
	}
}

// outOfTime is the Why of an inconclusive cell: its kind of run ran into
// bound (0: the exercise package's default), the policy's timeout times
// factor.
func outOfTime(kind string, bound time.Duration, factor int) string {
	if bound == 0 {
		bound = exercise.DefaultTimeout
	}
	return (&engine.TimeoutError{Kind: kind, Limit: bound, Factor: factor}).Error()
}

// onlyTimedOut reports whether every joint run that disagreed with the
// reference ran out of time: nothing showed a difference, so no diagnosis
// run is owed (it would only run out of time again).
func (c *Cell) onlyTimedOut() bool {
	for _, j := range c.Joint {
		if !j.Agrees && !j.TimedOut {
			return false
		}
	}
	return true
}

// runFunc runs the exercise once behind prefix (nil: on its own).
type runFunc func(prefix []string) (*exercise.Result, error)

// setDefaults fills in the zero fields that stand for a default.
func (opts *HereOptions) setDefaults() error {
	var err error
	if opts.JointRuns, err = jointRuns(opts.JointRuns); err != nil {
		return err
	}
	if opts.WorkDir == "" {
		opts.WorkDir = exercise.DefaultWorkDir
	}
	if opts.Exercises, err = filepath.Abs(opts.Exercises); err != nil {
		return err
	}
	if opts.Progress == nil {
		opts.Progress = func(string, ...any) {}
	}
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		opts.Exe = exe
	}
	if opts.program, err = refns.Open(opts.Exe); err != nil {
		return err
	}
	opts.runExe = refns.Path(opts.program)
	return nil
}

// unenforceable fails the cell when this kernel cannot enforce a rule of p,
// and reports whether it did.
func (c *Cell) unenforceable(p *policy.Policy) bool {
	row, _ := enforcer.Row(c.ABI)
	for _, u := range enforcer.CheckEnforceable(p, row) {
		c.Unenforceable = append(c.Unenforceable, engine.Rule{Rule: u.Rule, NeedABI: u.NeedABI, Why: u.Why})
	}
	if len(c.Unenforceable) == 0 {
		return false
	}
	c.Verdict, c.Why = Fail, fmt.Sprintf("this kernel (Landlock ABI %d) cannot enforce %d rule(s) of the policy: %s", c.ABI, len(c.Unenforceable), c.Unenforceable[0])
	return true
}

// jointRuns runs the exercise under the policy in cfg opts.JointRuns times
// and reports whether every run started and agreed with the reference.
func (c *Cell) jointRuns(opts HereOptions, name string, run runFunc, ref *exercise.Result, cfg string) (bool, error) {
	held := true
	for i := 1; i <= opts.JointRuns; i++ {
		opts.Progress("%s: joint run %d/%d", name, i, opts.JointRuns)
		// Every isolation layer, as a user's lockstep run: the exercise
		// must pass under the enforcer as it is shipped.
		res, err := run(enforcer.Command(enforcer.EnforcePrefix(opts.runExe), cfg))
		if err != nil {
			return false, fmt.Errorf("verify: joint run: %w", err)
		}
		agrees := res.Started && res.Verdict.Same(ref.Verdict)
		c.Joint = append(c.Joint, JointRun{Verdict: oneLine(res.Verdict), Status: res.Status, Agrees: agrees,
			TimedOut: res.Verdict.ExitClass == verdict.Timeout, Seconds: res.Duration.Seconds()})
		held = held && agrees
	}
	return held, nil
}

// diagnose runs the exercise once more under timed (the policy with the
// runs' limits), observed, to say why the joint runs disagreed: the cell
// fails with the refusals seen, or is indeterminate when the run could not
// be observed.
func (c *Cell) diagnose(ctx context.Context, opts HereOptions, timed *policy.Policy, name string, run runFunc) error {
	opts.Progress("%s: a joint run disagreed with the reference: diagnosis run (strace + audit where offered)", name)
	obs, err := engine.Observe(ctx, engine.HereOptions{Kernel: opts.Kernel, Policy: timed, Exe: opts.runExe, Log: opts.Log},
		func(ctx context.Context, prefix []string) (int, string, error) {
			res, err := run(prefix)
			if err != nil {
				return 0, "", err
			}
			return res.Status, string(res.Log), nil
		})
	if err != nil {
		return fmt.Errorf("verify: diagnosis run: %w", err)
	}
	c.Diagnosis = obs
	c.Verdict, c.Why = Fail, failWhy(obs)
	if obs.Indeterminate != "" && len(obs.Refusals) == 0 {
		c.Verdict, c.Why = Indeterminate, "the joint runs disagreed with the reference and the diagnosis run was not observed: "+obs.Indeterminate
	}
	return nil
}

// checkContainment runs the containment checks; the cell passes when each held or
// was skipped.
func (c *Cell) checkContainment(ctx context.Context, opts HereOptions, name string, early *contain.Early) error {
	opts.Progress("%s: containment checks", name)
	var err error
	c.Containment, err = containment(ctx, early, opts.Policy, containSetup(opts))
	if err != nil {
		return fmt.Errorf("verify: containment: %w", err)
	}
	c.Verdict = Pass
	for _, ch := range c.Containment {
		if !ch.Held && !ch.Skipped {
			c.Verdict, c.Why = Fail, fmt.Sprintf("the containment check %s did not hold: %s", ch.Name, ch.Detail)
			// An older kernel's gaps are the usual cause: name them, so a
			// base that cannot be enforced there says why.
			if gaps := landlock.Unrestricted(c.ABI); len(gaps) > 0 {
				c.Why += fmt.Sprintf(" (this kernel's Landlock ABI %d cannot restrict: %s)", c.ABI, landlock.GapNames(gaps))
			}
			break
		}
	}
	return nil
}

func failWhy(obs *engine.Observation) string {
	if len(obs.Refusals) == 0 {
		return fmt.Sprintf("the joint runs disagreed with the reference, and the diagnosis run (status %d) saw no Landlock refusal", obs.Status)
	}
	var calls []string
	for _, r := range obs.Refusals {
		calls = append(calls, fmt.Sprintf("%s %s (%s)", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ",")))
	}
	return fmt.Sprintf("the joint runs disagreed with the reference; refused: %s", strings.Join(calls, "; "))
}

func find(root, key, name string) (*exercise.Exercise, error) {
	found, err := exercise.ForKey(root, key)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	for _, f := range found {
		if f.Name == name {
			return exercise.Read(f)
		}
	}
	return nil, fmt.Errorf("verify: no exercise %q for key %q under %s", name, key, root)
}

// writePolicy writes the runs' policy into a new scratch directory.
func writePolicy(timed *policy.Policy) (scratch, cfg string, err error) {
	if scratch, err = os.MkdirTemp("", "lockstep-verify."); err != nil {
		return "", "", fmt.Errorf("verify: %w", err)
	}
	cfg = filepath.Join(scratch, "policy.cfg")
	if err := os.WriteFile(cfg, timed.Render(), 0o644); err != nil {
		os.RemoveAll(scratch)
		return "", "", fmt.Errorf("verify: %w", err)
	}
	return scratch, cfg, nil
}

// containSetup is how a cell's containment checks run their probes (their
// policy files in a temporary directory of each run's own): the enforcer
// through the open program; the probe, which the enforcer executes in its
// sandbox (where this process's descriptors are out of reach), by its path.
func containSetup(opts HereOptions) contain.Setup {
	return contain.Setup{Probe: []string{opts.Exe, contain.Verb}, Enforcer: enforcer.Prefix(opts.runExe, false),
		WorkDir: opts.WorkDir, Env: exercise.DefaultEnv(opts.WorkDir)}
}

func oneLine(v verdict.Verdict) string {
	pass, fail := 0, 0
	for _, t := range v.Tests {
		if strings.EqualFold(string(t.Outcome), "pass") || strings.EqualFold(string(t.Outcome), "passed") {
			pass++
		} else {
			fail++
		}
	}
	return fmt.Sprintf("%s, %d test(s): %d passed, %d not", v.ExitClass, len(v.Tests), pass, fail)
}

// containment runs evidence/contain's checks under p, as the pruner and the
// observer do: the canaries unreadable, a read-only path unwritable, a
// loopback port no rule names neither reachable nor bindable, and each limit
// the probe can reach holding; the timeout check is early's.
func containment(ctx context.Context, early *contain.Early, p *policy.Policy, s contain.Setup) ([]Check, error) {
	res, _, err := early.Finish(ctx, p, s)
	if err != nil {
		return nil, err
	}
	var checks []Check
	for _, r := range res {
		c := Check{Name: r.Name, Held: r.Refused, Skipped: r.Unchecked != "" && r.Control == "", Detail: strings.Join(r.Arguments, " ")}
		switch {
		case r.Unchecked != "":
			c.Detail = r.Unchecked
		case r.Control != "":
			c.Detail += "; control " + r.Control
		}
		checks = append(checks, c)
	}
	return checks, nil
}
