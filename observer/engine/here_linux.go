package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

// HereOptions configures ObserveHere and Observe: one observed run on the
// running kernel, rendered as an Observation.
type HereOptions struct {
	// Kernel names this kernel in the observation.
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
	return Observe(ctx, opts, func(ctx context.Context, prefix []string) (int, string, error) {
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

// Observe makes one observed run ([Run]) with Landlock's audit records
// collected where the kernel offers them, and reports it as an
// [Observation], the document repro compares across kernels. The command
// is run by run (opts.Command and opts.Dir are not used): package verify
// runs an exercise this way, and [ObserveHere] runs a command line.
func Observe(ctx context.Context, opts HereOptions, run RunFunc) (*Observation, error) {
	if opts.Policy == nil {
		return nil, errors.New("repro: a policy is required")
	}
	opts.setDefaults()
	exe, err := opts.exe()
	if err != nil {
		return nil, fmt.Errorf("repro: %w", err)
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
	col := startCollector(o, abi, opts)
	if col != nil {
		defer col.Close()
	}
	ob, err := Run(ctx, Spec{Policy: opts.Policy, Exe: exe, Scratch: scratch, Stem: "policy", Kind: "observed",
		LogSubprocesses: abi >= landlock.ABIAuditRecords, Collector: col, Wait: opts.Wait, Control: control.Options{NoCreate: true}, Run: run})
	if ferr := o.fill(ob, err, opts.Policy, abi); ferr != nil {
		return nil, ferr
	}
	if err == nil {
		o.Normalise()
	}
	return o, nil
}

// setDefaults fills in the zero fields that stand for a default.
func (opts *HereOptions) setDefaults() {
	if opts.Wait == 0 {
		opts.Wait = DefaultWait
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
}

// exe is the lockstep binary that enforces the policy.
func (opts *HereOptions) exe() (string, error) {
	if opts.Exe != "" {
		return opts.Exe, nil
	}
	return os.Executable()
}

// startCollector starts the audit collector where the kernel offers
// records, or says in o why there is none.
func startCollector(o *Observation, abi int, opts HereOptions) *audit.Collector {
	switch {
	case opts.NoAudit:
		o.AuditReason = "audit collection was turned off"
	case abi < landlock.ABIAuditRecords:
		o.AuditReason = fmt.Sprintf("Landlock ABI %d writes no audit records (ABI %d does)", abi, landlock.ABIAuditRecords)
	default:
		col, err := audit.Start(audit.Options{Log: opts.Log})
		if err != nil {
			o.AuditReason = fmt.Sprintf("the audit collector did not start: %v", err)
			return nil
		}
		o.Audit = true
		return col
	}
	return nil
}

// fill renders what the engine returned into o: a run that could not start
// or a trace that could not be read leave it indeterminate, a collector that
// failed is an error.
func (o *Observation) fill(ob *Observed, err error, p *policy.Policy, abi int) error {
	var se *StageError
	switch {
	case err == nil:
	case !errors.As(err, &se):
		return fmt.Errorf("repro: %w", err)
	case se.Stage == StageRun:
		o.Seconds, o.Stderr = ob.Seconds, lastLines(ob.Output, 20)
		o.Indeterminate = fmt.Sprintf("strace did not run the enforcer: %v", se.Err)
		return nil
	case se.Stage == StageAudit:
		return fmt.Errorf("repro: %w", err)
	}
	o.Seconds, o.Stderr, o.Status = ob.Seconds, lastLines(ob.Output, 20), ob.Status
	if o.Status == enforcer.StatusRefused {
		o.unenforceable(p, abi)
	}
	if err != nil {
		o.Indeterminate = err.Error()
		return nil
	}
	if ob.Audit != nil && len(ob.Audit.Problems) > 0 {
		o.Indeterminate = "audit: " + strings.Join(ob.Audit.Problems, "; ")
	}
	o.Refusals, o.AuditOnly, o.AuditRecords = Join(ob, strings.Split(string(ob.Trace), "\n"))
	return nil
}

// unenforceable lists the rules of p this ABI cannot enforce, the reason
// the enforcer refused the policy (exit 125); with none, the refusal was for
// another reason and the side is indeterminate.
func (o *Observation) unenforceable(p *policy.Policy, abi int) {
	row, _ := enforcer.Row(abi)
	for _, u := range enforcer.CheckEnforceable(p, row) {
		o.Unenforceable = append(o.Unenforceable, Rule{Rule: u.Rule, NeedABI: u.NeedABI, Why: u.Why})
	}
	if len(o.Unenforceable) == 0 {
		o.Indeterminate = "the enforcer refused the policy for another reason: " + strings.Join(o.Stderr, " | ")
	}
}

// Join renders the engine's match of refusals with denial records; it
// returns the refusals in trace order, the records no refusal took, and the
// number of filesystem and network denial records.
func Join(ob *Observed, lines []string) ([]Refusal, []string, int) {
	byRefusal := map[*attribute.Refusal][]*audit.Denial{}
	taken := map[*audit.Denial]bool{}
	for _, m := range ob.Join.Matched {
		byRefusal[m.Refusal] = m.Records
		for _, d := range m.Records {
			taken[d] = true
		}
	}
	out := make([]Refusal, 0, len(ob.Landlock))
	for _, r := range ob.Landlock {
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
		rr.Objects, rr.Rights = UniqueSorted(rr.Objects), UniqueSorted(rr.Rights)
		for _, d := range byRefusal[r] {
			rr.Audit = append(rr.Audit, d.Record.String())
		}
		out = append(out, rr)
	}
	only, records := []string{}, 0
	for i := range ob.Denials {
		d := &ob.Denials[i]
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

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, "\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if lines == nil {
		return []string{}
	}
	return lines
}
