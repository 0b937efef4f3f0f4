package observer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/lane"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
)

// A phase is n runs of one kind behind prefix that need no result of each
// other, made until enough says the runs so far settle it.
type phase struct {
	kind   string
	prefix []string
	n      int
	// name names run i in progress lines.
	name   func(i int) string
	enough func(done []*exercise.Result) bool
	// workDirBusy says the working directory is another job's (the
	// containment checks beside a round's runs): the runs after the first
	// then go to lanes even when there is only one, never to the working
	// directory.
	workDirBusy bool
}

// runPhase makes the phase's runs after those done (accounted already). The
// first runs alone (it anchors the phase, and a first run that settles
// it, a reference that cannot anchor or a joint run that differs, costs no
// more runs); when the observer has more than one lane, the rest run side
// by side, all of them. The results are in order, each accounted
// (account).
func (v *verification) runPhase(ctx context.Context, ph phase, done []*exercise.Result) ([]*exercise.Result, error) {
	if len(done) > 0 && ph.enough(done) {
		return done, nil
	}
	for i := len(done); i < ph.n; i++ {
		if lanes := v.lanes(ph.n-i, done); lanes > 1 || (ph.workDirBusy && len(done) > 0) {
			rest, err := v.sideBySide(ctx, ph.kind, ph.prefix, i, ph.n, lanes, ph.name)
			return append(done, rest...), err
		}
		v.o.progress("%s: %s", v.ex.Name, ph.name(i))
		res, err := v.exRun(ctx, ph.kind, ph.prefix)
		if err != nil {
			return nil, err
		}
		if done = append(done, res); ph.enough(done) {
			break
		}
	}
	return done, nil
}

// lanes is how many of a phase's rest runs run side by side after the
// runs done: none before the first has run alone; then one per lane the
// observer has, but no more than the guest's free memory holds twice over,
// judged by the first run's largest process (MaxRSSKiB), so that a run
// beside others is never short of memory it had alone (which would read as
// a flaky reference or a difference between the kernels).
func (v *verification) lanes(rest int, done []*exercise.Result) int {
	n := min(v.o.opts.Lanes, rest)
	if len(done) == 0 || n <= 1 {
		return 1
	}
	avail, ok := machine.MeminfoMB("MemAvailable")["MemAvailable"]
	if !ok {
		return 1
	}
	return lanesFor(n, avail, done[0].MaxRSSKiB)
}

// sideBySide makes runs from to n-1 in up to lanes lanes at once
// (laneRuns) and accounts for them in order.
func (v *verification) sideBySide(ctx context.Context, kind string, prefix []string, from, n, lanes int, name func(i int) string) ([]*exercise.Result, error) {
	results, err := v.laneRuns(ctx, prefix, from, n, lanes, name, nil)
	if err != nil {
		return nil, err
	}
	for _, res := range results {
		// A lane's own failure (status lane.SetupStatus) stops the run
		// before the command, which account takes as the defect it is.
		if err := v.account(kind, true, res); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// laneRuns makes runs from to n-1 in up to lanes lanes at once, on cpus
// when not empty: each from a fresh copy of its own, seen by the command at
// the working directory (package lane). The working directory itself must
// stay put meanwhile. It accounts for none of them and touches no state of
// the verification but its progress lines, so that it can run beside the
// cross-check.
func (v *verification) laneRuns(ctx context.Context, prefix []string, from, n, lanes int, name func(i int) string, cpus []int) ([]*exercise.Result, error) {
	if err := os.MkdirAll(v.o.work, 0o755); err != nil {
		return nil, fmt.Errorf("observe: the working directory the lanes bind over: %w", err)
	}
	free := make(chan int, lanes)
	for id := range lanes {
		free <- id
	}
	results, errs := make([]*exercise.Result, n-from), make([]error, n-from)
	var wg sync.WaitGroup
	for i := range n - from {
		id := <-free
		v.o.progress("%s: %s (lane %d of %d)", v.ex.Name, name(from+i), id+1, lanes)
		// A lane's run is always accounted: its start is its only event.
		v.o.steps.Note(LaneStep(name(from+i), id+1, lanes), schedule.Started)
		opts := v.runOptions(prefix)
		opts.CopyDir = filepath.Join(v.o.scratch, "lanes", strconv.Itoa(id+1), filepath.Base(v.o.work))
		if opts.Isolate != nil {
			opts.Isolate = v.o.isolation(opts.CopyDir)
		}
		lanes := v.o.runExe
		if opts.Isolate != nil {
			lanes = v.o.exe
		}
		opts.Prefix = append(lane.Command([]string{lanes}, opts.CopyDir, v.o.work, cpus), prefix...)
		wg.Add(1)
		go func() {
			defer func() { free <- id; wg.Done() }()
			results[i], errs[i] = v.ex.Run(ctx, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return results, nil
}

// exRun runs the exercise once behind prefix and accounts for it.
func (v *verification) exRun(ctx context.Context, kind string, prefix []string) (*exercise.Result, error) {
	res, err := v.ex.Run(ctx, v.runOptions(prefix))
	if err != nil {
		return nil, err
	}
	if err := v.account(kind, prefix != nil, res); err != nil {
		return nil, err
	}
	return res, nil
}

// runOptions are one run's options behind prefix.
func (v *verification) runOptions(prefix []string) exercise.RunOptions {
	bound := v.bound
	if prefix != nil && bound != 0 {
		// Under lockstep run the policy's timeout ends the command (124)
		// and strace, if any, ends cleanly; the runner's bound is the
		// backstop.
		bound += engine.PrefixGrace
	}
	opts := exercise.RunOptions{WorkDir: v.o.work, Prefix: prefix, Timeout: bound, Log: v.o.log}
	if prefix == nil {
		opts.Isolate = v.o.isolation("")
	}
	return opts
}

// isolation isolates a run as root with no sandbox (a reference run, in a
// lane or not; the warm-up run): the guest's /run/lockstep (this program,
// its shares, its results), the observer's inputs and outputs and its
// scratch directory (where later runs' traces are written) are read-only
// to it, but for copyDir, its lane's copy, if any; nothing it starts
// outlives it.
func (o *observer) isolation(copyDir string) *exercise.Isolation {
	ro := []string{proto.RunDir}
	for _, p := range []string{o.opts.Exercises, o.opts.PathSets, o.opts.Out, o.scratch} {
		if abs, err := filepath.Abs(p); err == nil {
			ro = append(ro, abs)
		}
	}
	iso := &exercise.Isolation{Program: o.program, ReadOnly: ro}
	if abs, err := filepath.Abs(copyDir); copyDir != "" && err == nil {
		iso.Writable = []string{abs}
	}
	return iso
}

// account counts a finished run of kind and notes the first run that ran
// out of time; a run behind a prefix (prefixed) must have let the command
// start.
func (v *verification) account(kind string, prefixed bool, res *exercise.Result) error {
	return v.accountTo(&v.stopped, kind, prefixed, res)
}

// accountTo is account noting the time-out in *stopped.
func (v *verification) accountTo(stopped **engine.TimeoutError, kind string, prefixed bool, res *exercise.Result) error {
	v.es.Runs[kind]++
	if res.Verdict.ExitClass == verdict.Timeout && *stopped == nil {
		*stopped = &engine.TimeoutError{Kind: kind, Limit: v.limit(), Factor: v.o.factor, Log: tail(res.Log)}
	}
	if prefixed && !res.Started {
		return engine.Abortf(map[string]any{"status": res.Status, "log": tail(res.BeforeStart())},
			"a defect of the pruner: the %s run stopped before the command started (status %d)", kind, res.Status)
	}
	return nil
}

// limit is the bound a run ran into: v.bound, or the exercise package's
// default when there is none.
func (v *verification) limit() time.Duration {
	if v.bound == 0 {
		return exercise.DefaultTimeout
	}
	return v.bound
}
