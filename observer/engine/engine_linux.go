package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

// Spec is one observed run: a policy, the lockstep binary that applies it
// and a runner for the command; Run does the rest.
type Spec struct {
	Policy *policy.Policy
	// Exe is the lockstep binary whose run verb applies Policy.
	Exe string
	// Scratch receives <Stem>.cfg (the rendered policy) and <Stem>.trace.
	Scratch, Stem string
	// Kind names the run in errors and aborts ("cross-check", "observed").
	Kind string
	// LogSubprocesses makes the enforcer ask the kernel to audit denials
	// after the exec too (Landlock ABI 7+).
	LogSubprocesses bool
	// Collector collects the run's Landlock audit records; nil observes
	// strace's side alone.
	Collector *audit.Collector
	// Wait bounds the wait for each domain's deallocation record.
	Wait time.Duration
	// Control configures the replay that confirms each refusal would have
	// succeeded unsandboxed.
	Control control.Options
	// Run runs the command behind the prefix Run builds.
	Run RunFunc
}

// RunFunc runs the observed command behind prefix (strace, then the
// enforcer, ending in "--") and returns its exit status and output; the
// error is for a command that could not be run at all.
type RunFunc func(ctx context.Context, prefix []string) (status int, output string, err error)

// Observed is what one observed run showed: its status, strace's log and
// the refusals attributed from it, the audit records and their join.
type Observed struct {
	Status int
	Output string
	// Seconds is the command's wall time under strace.
	Seconds float64
	// Trace is strace's log, as written.
	Trace []byte
	// Landlock are the refusals inside the enforcer's domain that
	// evidence/attribute puts in the filesystem or network layer and the
	// control replay confirms; Other are the limits' refusals there.
	Landlock, Other []*attribute.Refusal
	// Audit is what the collector saw of the run's domains, and Denials
	// its denial records (both nil without a collector).
	Audit   *audit.RunResult
	Denials []audit.Denial
	// Join matches Landlock with Denials (CrossCheck).
	Join *Comparison
}

// Stages of an observed run, as a StageError names them.
const (
	// StageRun: the command could not be run (Spec.Run's error).
	StageRun = "run"
	// StageTrace: strace's log could not be read whole.
	StageTrace = "trace"
	// StageAudit: the collector failed (not a judgement of the records:
	// that is JudgeAudit's).
	StageAudit = "audit"
)

// StageError is an observed run that stopped at Stage; it reads as Err.
type StageError struct {
	Stage string
	Err   error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// Run is the one observed-run engine, and returns its raw result
// ([Observed]; [Observe] renders it as a document): it writes the policy, opens
// the run's audit window when there is a collector, runs the command under
// strace and the enforcer, attributes the trace, closes the window on the
// processes strace saw and joins the two views. Errors after the command
// was started are *StageError and come with what was learned so far (the
// status and output from StageTrace on); judging the result (JudgeAudit,
// an indeterminate observation) is the caller's.
func Run(ctx context.Context, s Spec) (*Observed, error) {
	base := filepath.Join(s.Scratch, s.Stem)
	if err := os.WriteFile(base+".cfg", s.Policy.Render(), 0o644); err != nil {
		return nil, err
	}
	var run *audit.Run
	if s.Collector != nil {
		var err error
		if run, err = s.Collector.Begin(ctx); err != nil {
			return nil, &StageError{StageAudit, fmt.Errorf("audit: %w", err)}
		}
	}
	abandon := func() {
		if run != nil {
			run.End(ctx, func(int) bool { return false }, 0)
		}
	}
	t0 := time.Now()
	status, output, err := s.Run(ctx, tracedCommand(base+".trace", s.Exe, base+".cfg", s.LogSubprocesses))
	ob := &Observed{Status: status, Output: output, Seconds: time.Since(t0).Seconds()}
	if err != nil {
		abandon()
		return ob, &StageError{StageRun, err}
	}
	tr, err := readTrace(s.Kind, base+".trace", ob)
	if err != nil {
		abandon()
		return ob, &StageError{StageTrace, err}
	}
	pids := map[int]bool{}
	for _, c := range tr.Calls {
		pids[c.PID], pids[c.TGID] = true, true
	}
	var devices []*attribute.Refusal
	ob.Landlock, ob.Other, devices = confirmed(tr.Calls, s.Control)
	if run != nil {
		if ob.Audit, err = run.End(ctx, func(pid int) bool { return pids[pid] }, s.Wait); err != nil {
			return ob, &StageError{StageAudit, fmt.Errorf("audit: %w", err)}
		}
		ob.Denials = ob.Audit.Denials()
	}
	ob.Join = CrossCheck(append(slices.Clone(ob.Landlock), devices...), ob.Denials, nil)
	return ob, nil
}

// tracedCommand is the enforcer's command line for cfg under strace -f,
// stopping at TracedCalls only and logging to trace: how every observed
// run starts. The enforcer's own seccomp filter refuses TIOCSTI and
// TIOCLINUX ioctls (EPERM) before strace's filter can stop them, so those
// calls are not in the trace; nothing is lost to the comparison: seccomp
// refuses them before Landlock sees them, so there is no record to pair,
// and an EPERM is never a Landlock refusal (attribute.Other).
func tracedCommand(trace, exe, cfg string, logSubprocesses bool) []string {
	return strace.SeccompCommand(trace, TracedCalls(), enforcer.Command(enforcer.Prefix(exe, logSubprocesses), cfg)...)
}

// readTrace reads a run's trace into ob and parses it; a trace with a line
// the parser cannot read is an abort (JudgeTrace).
func readTrace(kind, path string, ob *Observed) (*strace.Trace, error) {
	var err error
	if ob.Trace, err = os.ReadFile(path); err != nil {
		return nil, fmt.Errorf("the %s run's trace: %w", kind, err)
	}
	tr, err := strace.ParseFileLenient(path)
	if err != nil {
		return nil, fmt.Errorf("the %s run's trace: %w", kind, err)
	}
	if ae := JudgeTrace(kind, tr.Errors); ae != nil {
		return nil, ae
	}
	return tr, nil
}

// confirmed sorts the trace's refusals inside the enforcer's domain: the
// filesystem and network ones the control replay confirms, the limits', and
// the device ioctls refused with EACCES (Landlock's fs.ioctl_dev: never
// granted by the pruner, but the kernel records them, so the cross-check
// pairs them with their records).
func confirmed(calls []*strace.Call, copts control.Options) (landlock, other, devices []*attribute.Refusal) {
	for _, r := range attribute.Refusals(calls, attribute.Options{Resolve: attribute.ResolveSymlinks}) {
		if r.Call == nil || !r.Call.InDomain {
			continue
		}
		switch r.Layer {
		case attribute.Filesystem, attribute.Network:
			if control.Replay(r, copts).Landlock {
				landlock = append(landlock, r)
			}
		case attribute.Limit:
			other = append(other, r)
		case attribute.Fixed:
			if r.Op == "ioctl" && r.Errno == "EACCES" && len(r.Paths) == 1 {
				devices = append(devices, r)
			}
		}
	}
	return landlock, other, devices
}
