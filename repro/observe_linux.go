//go:build linux

package repro

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/machine"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/pruner/attribute"
	"github.com/lockstep-sandbox/lockstep/pruner/control"
	"github.com/lockstep-sandbox/lockstep/pruner/strace"
)

// abiAudit is the first Landlock ABI that writes audit records (and takes
// --log-subprocesses).
const abiAudit = 7

// DefaultWait bounds the wait for each domain's deallocation record.
const DefaultWait = 30 * time.Second

// HereOptions configures ObserveHere.
type HereOptions struct {
	// Kernel names this kernel in the observation; "" is HostKernel.
	Kernel  string
	Policy  *policy.Policy
	Command []string
	// Exe is the lockstep binary whose `run` applies the policy; "" is
	// this executable.
	Exe string
	// Dir is the command's working directory; "" is the current one.
	Dir string
	// NoAudit skips the audit collector even where the kernel offers it.
	NoAudit bool
	// Wait bounds the wait for domain deallocation records; 0 is
	// DefaultWait.
	Wait time.Duration
	// Log receives debug messages; nil discards them.
	Log *slog.Logger
}

// ObserveHere runs the command under the policy on the running kernel,
// under strace and, where the kernel offers it (Landlock ABI 7 or more, and
// the rights to register as the audit daemon), with Landlock's audit records
// collected and joined to strace's refusals. The error is for failures to
// run at all (no strace, no Landlock); everything else is in the
// observation, Indeterminate included.
func ObserveHere(ctx context.Context, opts HereOptions) (*Observation, error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("repro: a command is required")
	}
	return ObserveRun(ctx, opts, func(ctx context.Context, prefix []string) (int, string, error) {
		argv := append(append([]string{}, prefix...), opts.Command...)
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = opts.Dir, &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() >= 0 {
			return ee.ExitCode(), out.String(), nil
		}
		return 0, out.String(), err
	})
}

// RunFunc runs the observed command behind prefix (strace, then the
// enforcer, ending in "--") and returns its exit status and output; the
// error is for a command that could not be run at all.
type RunFunc func(ctx context.Context, prefix []string) (status int, output string, err error)

// ObserveRun is ObserveHere with the command run by run (opts.Command and
// opts.Dir are not used): package verify runs an exercise this way.
func ObserveRun(ctx context.Context, opts HereOptions, run RunFunc) (*Observation, error) {
	if opts.Policy == nil {
		return nil, errors.New("repro: a policy is required")
	}
	if opts.Kernel == "" {
		opts.Kernel = HostKernel
	}
	if opts.Wait == 0 {
		opts.Wait = DefaultWait
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	exe := opts.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("repro: %w", err)
		}
	}
	if _, err := exec.LookPath("strace"); err != nil {
		return nil, fmt.Errorf("repro: strace is needed to observe the command: %w", err)
	}
	abi, err := enforcer.HostABI()
	if err != nil {
		return nil, fmt.Errorf("repro: Landlock ABI of the running kernel: %w", err)
	}
	o := &Observation{Schema: ObservationSchema, Kernel: opts.Kernel, ABI: abi, Release: machine.Release()}
	scratch, err := os.MkdirTemp("", "lockstep-repro.")
	if err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	defer os.RemoveAll(scratch)
	cfg, trace := filepath.Join(scratch, "policy.cfg"), filepath.Join(scratch, "trace")
	if err := os.WriteFile(cfg, opts.Policy.Render(), 0o644); err != nil {
		return nil, fmt.Errorf("repro: %w", err)
	}
	var col *audit.Collector
	switch {
	case opts.NoAudit:
		o.AuditReason = "audit collection was turned off"
	case abi < abiAudit:
		o.AuditReason = fmt.Sprintf("Landlock ABI %d writes no audit records (ABI %d does)", abi, abiAudit)
	default:
		if col, err = audit.Start(audit.Options{Log: opts.Log}); err != nil {
			o.AuditReason = fmt.Sprintf("the audit collector did not start: %v", err)
		} else {
			defer col.Close()
			o.Audit = true
		}
	}
	var arun *audit.Run
	if col != nil {
		if arun, err = col.Begin(ctx); err != nil {
			return nil, fmt.Errorf("repro: audit: %w", err)
		}
	}
	argv := strace.Command(trace, enforcer.Command(enforcer.Prefix(exe, abi >= abiAudit), cfg)...)
	t0 := time.Now()
	status, output, err := run(ctx, argv)
	o.Seconds = time.Since(t0).Seconds()
	o.Stderr = tail(output, 20)
	if err != nil {
		if arun != nil {
			arun.End(ctx, func(int) bool { return false }, 0)
		}
		o.Indeterminate = fmt.Sprintf("strace did not run the enforcer: %v", err)
		return o, nil
	}
	o.Status = status
	if o.Status == enforcer.StatusRefused {
		for _, u := range enforcer.CheckEnforceable(opts.Policy, rowOf(abi)) {
			o.Unenforceable = append(o.Unenforceable, Rule{Rule: u.Rule, NeedABI: u.NeedABI, Why: u.Why})
		}
		if len(o.Unenforceable) == 0 {
			o.Indeterminate = "the enforcer refused the policy for another reason: " + strings.Join(o.Stderr, " | ")
		}
	}
	refusals, lines, err := refusalsOf(trace)
	if err != nil {
		if arun != nil {
			arun.End(ctx, func(int) bool { return false }, 0)
		}
		o.Indeterminate = err.Error()
		return o, nil
	}
	var denials []audit.Denial
	if arun != nil {
		pids := map[int]bool{}
		for _, l := range lines.pids {
			pids[l] = true
		}
		res, err := arun.End(ctx, func(pid int) bool { return pids[pid] }, opts.Wait)
		if err != nil {
			return nil, fmt.Errorf("repro: audit: %w", err)
		}
		if len(res.Problems) > 0 {
			o.Indeterminate = "audit: " + strings.Join(res.Problems, "; ")
		}
		denials = res.Denials()
	}
	o.Refusals, o.AuditOnly, o.AuditRecords = join(refusals, denials, lines.text)
	o.normalise()
	return o, nil
}

// traceLines is what the trace says beside its calls: the raw lines and
// every pid seen.
type traceLines struct {
	text []string
	pids []int
}

// refusalsOf parses the trace and keeps the Landlock refusals inside the
// enforcer's domain that the control replay confirms.
func refusalsOf(path string) ([]*attribute.Refusal, traceLines, error) {
	var tl traceLines
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, tl, fmt.Errorf("the trace: %w", err)
	}
	tl.text = strings.Split(string(raw), "\n")
	tr, err := strace.ParseFileLenient(path)
	if err != nil {
		return nil, tl, fmt.Errorf("the trace: %w", err)
	}
	if ae := observer.JudgeTrace("observed", tr.Errors); ae != nil {
		return nil, tl, ae
	}
	for _, c := range tr.Calls {
		tl.pids = append(tl.pids, c.PID, c.TGID)
	}
	var out []*attribute.Refusal
	for _, r := range attribute.Refusals(tr.Calls, attribute.Options{Resolve: attribute.ResolveSymlinks}) {
		if r.Call == nil || !r.Call.InDomain {
			continue
		}
		if r.Layer != attribute.Filesystem && r.Layer != attribute.Network {
			continue
		}
		if control.Replay(r, control.Options{NoCreate: true}).Landlock {
			out = append(out, r)
		}
	}
	return out, tl, nil
}

// join matches refusals with denial records through observer.CrossCheck and
// renders both; it returns the refusals in trace order, the records no
// refusal took, and the number of filesystem and network denial records.
func join(refusals []*attribute.Refusal, denials []audit.Denial, lines []string) ([]Refusal, []string, int) {
	cmp := observer.CrossCheck(refusals, denials)
	byRefusal := map[*attribute.Refusal][]*audit.Denial{}
	taken := map[*audit.Denial]bool{}
	for _, m := range cmp.Matched {
		byRefusal[m.Refusal] = m.Records
		for _, d := range m.Records {
			taken[d] = true
		}
	}
	out := make([]Refusal, 0, len(refusals))
	for _, r := range refusals {
		rr := Refusal{Call: r.Call.Name, Op: r.Op, Layer: string(r.Layer), Errno: r.Errno, Number: r.Call.Line,
			Grant: GrantRows(r.Policy()), Audit: []string{}}
		if n := r.Call.Line; n >= 1 && n <= len(lines) {
			rr.Line = lines[n-1]
		}
		if r.Layer == attribute.Network {
			for _, n := range r.Net {
				rr.Objects = append(rr.Objects, strconv.Itoa(n.Port)+"/"+string(n.Transport))
				rr.Rights = append(rr.Rights, string(n.Right))
			}
		} else {
			rr.Objects = append(rr.Objects, r.Paths...)
			for _, x := range r.Rights {
				rr.Rights = append(rr.Rights, string(x))
			}
		}
		rr.Objects, rr.Rights = sortedSet(rr.Objects), sortedSet(rr.Rights)
		for _, d := range byRefusal[r] {
			rr.Audit = append(rr.Audit, d.Record.String())
		}
		out = append(out, rr)
	}
	only, records := []string{}, 0
	for i := range denials {
		d := &denials[i]
		if !fsOrNet(d) {
			continue
		}
		records++
		if !taken[d] {
			only = append(only, d.Record.String())
		}
	}
	return out, only, records
}

func fsOrNet(d *audit.Denial) bool {
	for _, b := range d.Access.Blockers {
		if bl, ok := audit.LookupBlocker(b); ok && (bl.Class == audit.ClassFS || bl.Class == audit.ClassNet) {
			return true
		}
	}
	return false
}

func rowOf(abi int) enforcer.ABIRow {
	row, _ := enforcer.Row(abi)
	return row
}
