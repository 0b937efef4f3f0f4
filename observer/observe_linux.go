package observer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/observer/proof"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
	"github.com/lockstep-sandbox/lockstep/record"
)

// Guest is the observer inside the guest: it starts the audit collector before
// any workload, proves the kernel (observer/proof; anything but held is
// status 3 and nothing is written), then verifies each exercise of the key
// and writes its records to opts.Out. The error is for failures to start at
// all; the outcome is in the Summary.
func Guest(ctx context.Context, opts GuestOptions) (*Summary, error) {
	start := time.Now()
	o, err := newObserver(opts)
	if err != nil {
		return nil, err
	}
	defer o.cleanup()
	sum := &Summary{Schema: SummarySchema, Key: opts.Key, Exercises: []ExerciseSummary{}, TimeFactor: o.recordedFactor()}
	raw, err := openRaw(opts.AuditRaw)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	// A lowered backlog (--backlog-limit, for tests) is for provoking loss.
	col, err := audit.Start(audit.Options{BacklogLimit: opts.BacklogLimit, Log: o.log, Raw: raw.w,
		DropWhenFull: opts.BacklogLimit != 0 && opts.BacklogLimit < audit.DefaultBacklogLimit})
	if err != nil {
		sum.Status, sum.Reason = StatusIndeterminate, fmt.Sprintf("the audit collector did not start: %v", err)
		return sum, nil
	}
	defer col.Close()
	o.col = col
	o.progress("proving the kernel (Landlock ABI %d or more, one refusal per right → one record)", opts.WantABI)
	stopWarmUp := o.warmUp(ctx)
	rep, err := proof.Run(ctx, proof.Options{WantRelease: opts.WantRelease, WantABI: opts.WantABI,
		Exe: o.exe, Collector: col, Wait: o.wait, Log: o.log})
	stopWarmUp()
	if err != nil {
		sum.Status, sum.Reason = StatusIndeterminate, fmt.Sprintf("the kernel proof could not run: %v", err)
		return sum, nil
	}
	sum.Proof = rep
	if rep.Status != proof.StatusHeld {
		sum.Status, sum.Reason = StatusIndeterminate, "the kernel proof did not hold: "+rep.Summary()
		return sum, nil
	}
	o.proven(ctx, rep.ABI)
	if st, err := col.Status(); err == nil {
		sum.Audit.LostBefore = st.Lost
	}
	status := o.exercises(ctx, sum)
	st, err := col.Status()
	if err != nil {
		return nil, fmt.Errorf("observe: audit status: %w", err)
	}
	sum.Audit.Received, sum.Audit.Lost, sum.Audit.Backlog, sum.Audit.BacklogLimit = col.Received(), st.Lost, st.Backlog, st.BacklogLimit
	sum.Status, sum.Schedule = status, o.steps.Events()
	sum.Seconds = time.Since(start).Seconds()
	b, err := record.Marshal(sum)
	if err != nil {
		return nil, err
	}
	if err := safefile.WriteFile(filepath.Join(opts.Out, SummaryFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	return sum, nil
}

// rawFile is where the collector's raw records go: a file, or nowhere.
type rawFile struct {
	f *os.File
	w io.Writer
}

// openRaw creates path for the raw audit records; "" keeps none.
func openRaw(path string) (*rawFile, error) {
	if path == "" {
		return &rawFile{}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("observe: the raw audit log: %w", err)
	}
	return &rawFile{f: f, w: f}, nil
}

func (r *rawFile) Close() {
	if r.f != nil {
		r.f.Close()
	}
}

// exercises verifies every exercise of the key and writes its files.
func (o *observer) exercises(ctx context.Context, sum *Summary) int {
	found, err := exercise.ForKey(o.opts.Exercises, o.opts.Key)
	if err == nil && len(found) == 0 {
		err = fmt.Errorf("no exercise for key %q under %s", o.opts.Key, o.opts.Exercises)
	}
	if err != nil {
		sum.Reason = err.Error()
		return StatusFailed
	}
	failed, inconclusive := false, false
	for _, f := range found {
		t0 := time.Now()
		k, sidecar, trace, es := o.verify(ctx, f)
		es.Seconds = time.Since(t0).Seconds()
		if err := o.write(k, sidecar, trace); err != nil {
			es.Verified, es.Reason = false, err.Error()
		}
		switch {
		case es.Verified:
			o.progress("%s: verified, rows %v (%.1f s)", f.Name, rowRules(k.Rows), es.Seconds)
		case es.Inconclusive:
			inconclusive = true
			o.progress("%s: INCONCLUSIVE: %s", f.Name, es.Reason)
		case strings.Contains(es.Reason, engine.RecordsLost):
			inconclusive = true
			o.progress("%s: INDETERMINATE: %s", f.Name, es.Reason)
		default:
			failed = true
			o.progress("%s: FAILED: %s", f.Name, es.Reason)
		}
		sum.Exercises = append(sum.Exercises, es)
	}
	return exercisesStatus(failed, inconclusive)
}

// exercisesStatus is the run's status: a failed exercise is a finding (1);
// otherwise lost records or a run that ran out of time leave the run
// indeterminate (3), never verified.
func exercisesStatus(failed, inconclusive bool) int {
	switch {
	case failed:
		return StatusFailed
	case inconclusive:
		return StatusIndeterminate
	}
	return StatusVerified
}

// write replaces an exercise's .abi10 files: stale ones go first, then the
// trace, the sidecar (only with rows) and the record, each atomically.
func (o *observer) write(k *kvmrecord.Record, sidecar, trace []byte) error {
	stem := filepath.Join(o.opts.Out, k.Key+"_"+k.Exercise)
	for _, suffix := range []string{".abi10.cfg", ".abi10.json", TraceSuffix} {
		if err := os.Remove(stem + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("observe: %w", err)
		}
	}
	if trace != nil {
		gz, err := Compress(trace)
		if err != nil {
			return err
		}
		if err := safefile.WriteFile(stem+TraceSuffix, gz, 0o644); err != nil {
			return err
		}
	}
	if sidecar != nil {
		if err := safefile.WriteFile(stem+".abi10.cfg", sidecar, 0o644); err != nil {
			return err
		}
	}
	_, err := kvmrecord.Write(o.opts.Out, k)
	return err
}

type observer struct {
	opts GuestOptions
	// progressMu keeps the progress lines of runs side by side whole.
	progressMu sync.Mutex
	exe        string
	// program is exe, open before any run: the isolated runs' role
	// (exercise.Isolation) is executed through it, and so is every
	// lockstep this process starts itself (runExe, its path), never
	// again by a path a run could have replaced. What runs inside a
	// sandbox or an isolated run, out of reach of this process's
	// descriptors, gets exe.
	program *os.File
	runExe  string
	work    string
	scratch string
	rmTemp  bool
	wait    time.Duration
	log     *slog.Logger
	col     *audit.Collector
	abi     int
	prov    record.Provenance
	// factor multiplies the exercise runs' time limits (TimeFactor).
	factor int
	// steps is the event log of what the schedule ran beside what: every
	// step started beside another, kept, discarded or cancelled.
	steps *schedule.Log
}

func newObserver(opts GuestOptions) (*observer, error) {
	if opts.Key == "" || opts.Exercises == "" || opts.PathSets == "" || opts.Out == "" {
		return nil, errors.New("observe: Key, Exercises, PathSets and Out are required")
	}
	if opts.WantABI < kvmrecord.ABI10 {
		return nil, fmt.Errorf("observe: WantABI %d: the observer needs Landlock ABI %d or more", opts.WantABI, kvmrecord.ABI10)
	}
	o := &observer{opts: opts, exe: opts.Exe, work: opts.WorkDir, scratch: opts.Scratch, wait: opts.Wait, log: opts.Log,
		factor: harness.TimeFactor(opts.Accel, opts.TCGTimeFactor)}
	if o.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("observe: %w", err)
		}
		o.exe = exe
	}
	program, err := refns.Open(o.exe)
	if err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	o.program, o.runExe = program, refns.Path(program)
	if o.work == "" {
		o.work = exercise.DefaultWorkDir
	}
	if o.wait == 0 {
		o.wait = engine.DefaultWait
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	o.steps = &schedule.Log{OnEvent: func(e schedule.Event) { o.log.Debug("observe: schedule", "step", e.Step, "event", e.Kind) }}
	if o.opts.ReferenceRuns == 0 {
		o.opts.ReferenceRuns = DefaultReferenceRuns
	}
	if o.opts.JointRuns == 0 {
		o.opts.JointRuns = DefaultJointRuns
	}
	if o.opts.Rounds == 0 {
		o.opts.Rounds = DefaultRounds
	}
	if o.scratch == "" {
		d, err := os.MkdirTemp("", "lockstep-observe.")
		if err != nil {
			return nil, fmt.Errorf("observe: %w", err)
		}
		o.scratch, o.rmTemp = d, true
	}
	return o, nil
}

// proven notes the Landlock ABI the kernel proof found and the provenance
// every record of the run carries, the root's digest the host took among it.
func (o *observer) proven(ctx context.Context, abi int) {
	o.abi = abi
	o.prov = record.NewProvenance(time.Now(), abi, record.StraceVersion(ctx))
	o.prov.RootDigest = o.opts.RootDigest
	if o.factor > 1 {
		o.progress("time factor %d: under TCG the exercise runs' timeout and cpu limits are the policy's ×%d (--tcg-time-factor); the containment checks keep the policy's own", o.factor, o.factor)
	}
}

// recordedFactor is the time factor as the records keep it: absent (0)
// for 1, as in records made before it was recorded.
func (o *observer) recordedFactor() int {
	if o.factor > 1 {
		return o.factor
	}
	return 0
}

func (o *observer) cleanup() {
	o.program.Close()
	if o.rmTemp {
		os.RemoveAll(o.scratch)
	}
}

func (o *observer) progress(format string, args ...any) {
	if o.opts.Progress != nil {
		o.progressMu.Lock()
		defer o.progressMu.Unlock()
		fmt.Fprintf(o.opts.Progress, "observe: "+format+"\n", args...)
	}
}

// verify runs the checks of one exercise (the record's hash, the reference
// runs, the cross-check, the ABI-10 rounds, then the containment checks)
// and returns its record, sidecar (nil without rows or when a check failed)
// and the observed run's strace log.
func (o *observer) verify(ctx context.Context, f exercise.Found) (k *kvmrecord.Record, sidecar, trace []byte, es ExerciseSummary) {
	k = &kvmrecord.Record{SchemaVersion: kvmrecord.Schema, Key: o.opts.Key, Exercise: f.Name, Provenance: o.prov,
		Kernel: o.prov.Kernel, LandlockABI: o.abi, Mismatches: []kvmrecord.Mismatch{}, AuditOnly: []kvmrecord.AuditOnly{}, Rows: []kvmrecord.Row{},
		TimeFactor: o.recordedFactor()}
	es = ExerciseSummary{Exercise: f.Name, Reference: []float64{}, Runs: map[string]int{}}
	v := &verification{o: o, k: k, es: &es}
	reason, err := v.run(ctx, f)
	if err != nil {
		var ae *engine.AbortError
		var re *exercise.RefusedError
		var te *engine.TimeoutError
		switch {
		case errors.As(err, &te) && len(k.Mismatches) == 0:
			// Nothing was found before the run stopped: no verdict on
			// the kernel either way.
			k.Aborted, k.Evidence = te.Error(), te.Evidence()
			es.Inconclusive = true
		case errors.As(err, &te):
			k.Aborted, k.Evidence = engine.OneLine(fmt.Sprintf("the audit cross-check found %d strace denial(s) the kernel's records do not agree with (then: %v)", len(k.Mismatches), te)), te.Evidence()
		case errors.As(err, &ae):
			k.Aborted, k.Evidence = ae.Reason, ae.Evidence
		case errors.As(err, &re):
			k.Aborted, k.Evidence = engine.OneLine("the exercise was refused: "+err.Error()), map[string]any{}
		default:
			k.Aborted, k.Evidence = engine.OneLine(fmt.Sprintf("a defect of the pruner: %v", err)), map[string]any{}
		}
		reason = k.Aborted
	}
	k.Verified = reason == ""
	es.Verified, es.Reason = k.Verified, reason
	if k.Verified && len(k.Rows) > 0 {
		sidecar = kvmrecord.Sidecar(k.Key, k.Exercise, k.Provenance, k.Rows)
		h := record.SHA256Hex(sidecar)
		k.ABI10CfgSHA256 = &h
	}
	return k, sidecar, v.trace, es
}

// verification is one exercise's state across its checks.
type verification struct {
	o     *observer
	k     *kvmrecord.Record
	es    *ExerciseSummary
	ex    *exercise.Exercise
	ref   *exercise.Result
	trace []byte
	// bound is every run's time limit (RunBound); stopped is the first run
	// that ran into it.
	bound   time.Duration
	stopped *engine.TimeoutError
	// foretold are the UDP ports the cross-check was refused a bind to
	// (foretold), which the ABI-10 phase's joint runs will be refused too.
	foretold []int
}

func (v *verification) run(ctx context.Context, f exercise.Found) (reason string, err error) {
	o, stem := v.o, stemOf(v.o.opts.Key, f.Name)
	// 1. The policy and the record that vouches for it, raw bytes.
	cfgPath := filepath.Join(o.opts.PathSets, stem+".cfg")
	cfg, err := safefile.ReadFile(cfgPath, policy.MaxFileBytes)
	if err != nil {
		return "", engine.Abortf(nil, "%s.cfg cannot be read: %v", stem, err)
	}
	rec, err := record.ReadExercise(filepath.Join(o.opts.PathSets, stem+".json"))
	if err != nil {
		return "", engine.Abortf(nil, "%s.json cannot be read: %v", stem, err)
	}
	digest := record.SHA256Hex(cfg)
	if rec.CfgSHA256 != digest {
		return "", engine.Abortf(map[string]any{"cfg_sha256": digest, "recorded_cfg_sha256": rec.CfgSHA256},
			"%s.cfg is not the file its record describes: its SHA-256 differs", stem)
	}
	v.k.VerifiedCfgSHA256 = &digest
	p, err := policy.Parse(cfgPath, cfg)
	if err != nil {
		return "", engine.Abortf(nil, "%s.cfg does not parse: %v", stem, err)
	}
	v.bound = engine.RunBound(v.timed(p), o.opts.RunTimeout)
	if v.ex, err = exercise.Read(f); err != nil {
		return "", err
	}
	// The containment's timeout check waits out the policy's timeout;
	// it waits beside the runs (startTimeoutCheck).
	early := v.startTimeoutCheck(ctx, p)
	defer early.Stop()
	// 2. The guest's own reference and 3. the cross-check, which runs
	// beside the reference runs after the first (referenceAndCrossCheck).
	reason, err = v.referenceAndCrossCheck(ctx, p)
	if err != nil {
		return "", err
	}
	// 4. The ABI-10 phase always runs; its rows land in the record.
	final, contained, err := v.abi10(ctx, p, early)
	if err != nil {
		return "", err
	}
	// 5. Containment under the verified policy, unless it ran beside the
	// last round's first joint run (besideFirstJoint).
	var checks []record.ContainmentCheck
	var failed []string
	if contained != nil {
		checks, failed, err = v.keepContainment(contained)
	} else {
		checks, failed, err = v.contain(ctx, final, p, early)
	}
	if err != nil {
		return "", err
	}
	v.es.Containment = containmentChecks(checks)
	if len(failed) > 0 && reason == "" {
		reason = "containment checks did not hold: " + strings.Join(failed, "; ")
	}
	return reason, nil
}

func stemOf(key, name string) string { return key + "_" + name }

// timed is p with the limits the exercise runs get: its timeout and cpu
// multiplied by the time factor (Slowed). The containment checks take p.
func (v *verification) timed(p *policy.Policy) *policy.Policy { return engine.Slowed(p, v.o.factor) }

func rowRules(rows []kvmrecord.Row) []string {
	s := []string{}
	for _, r := range rows {
		s = append(s, r.Rule)
	}
	return s
}

// tail is the last 4 KiB of a log, as text.
func tail(b []byte) string {
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
