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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/observer/lane"
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
	sum.Status = status
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
		factor: engine.TimeFactor(opts.Accel, opts.TCGTimeFactor)}
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

// verify runs the checks of one exercise (Phobos's verify_exercise, in its
// order, plus the containment checks) and returns its record, sidecar (nil without
// rows or when a check failed) and the observed run's strace log.
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

// referenceAndCrossCheck makes the guest's own reference, ReferenceRuns
// unsandboxed runs that must run tests and agree, and the cross-check,
// which needs no result of theirs. The first reference run runs alone: it
// anchors the verification, and one that cannot costs nothing more. With
// lanes to spare (besideLanes) the cross-check then runs in the working
// directory itself, on the CPU a traced run keeps (pinOneCPU), while the
// other reference runs run in lanes on the other CPUs. Everything is judged
// in the order of runs one after another: the reference first, and a
// reference that does not hold discards the cross-check (which it stops).
func (v *verification) referenceAndCrossCheck(ctx context.Context, p *policy.Policy) (string, error) {
	n, name := v.o.opts.ReferenceRuns, v.referenceRun
	v.o.progress("%s: %s", v.ex.Name, name(0))
	first, err := v.exRun(ctx, "reference", nil)
	if err != nil {
		return "", err
	}
	done := []*exercise.Result{first}
	lanes, cpus := v.besideLanes(n-1, first)
	if v.referenceProblem(done) != nil || lanes == 0 {
		if err := v.referenceFrom(ctx, done); err != nil {
			return "", err
		}
		return v.crossCheck(ctx, p)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	refs := schedule.Go(cctx, v.o.steps, "reference runs beside the cross-check", func(ctx context.Context) ([]*exercise.Result, error) {
		rest, err := v.laneRuns(ctx, nil, 1, n, lanes, name, cpus)
		if err != nil || !referenceAgrees(append(done[:1:1], rest...)) {
			// The cross-check is discarded: no need to finish it.
			v.o.steps.Note("cross-check run", schedule.Cancelled)
			cancel()
		}
		return rest, err
	})
	// The cross-check's time-out, if any, counts after the reference's:
	// it is its own until the reference runs are settled.
	var crossStopped *engine.TimeoutError
	ob, removed, crossErr := v.crossCheckRun(cctx, p, &crossStopped)
	rest, err := refs.Keep()
	if err != nil {
		return "", err
	}
	for _, res := range rest {
		if err := v.account("reference", true, res); err != nil {
			return "", err
		}
	}
	if err := v.settleReference(append(done, rest...)); err != nil {
		return "", err
	}
	if v.stopped == nil {
		v.stopped = crossStopped
	}
	return v.crossCheckJudge(ob, removed, crossErr)
}

// reference makes the reference runs with nothing beside them.
func (v *verification) reference(ctx context.Context) error { return v.referenceFrom(ctx, nil) }

// referenceFrom makes the reference runs after those done (a phase of
// their own) and settles them.
func (v *verification) referenceFrom(ctx context.Context, done []*exercise.Result) error {
	results, err := v.runPhase(ctx, phase{kind: "reference", n: v.o.opts.ReferenceRuns, name: v.referenceRun,
		enough: func(done []*exercise.Result) bool { return v.referenceProblem(done) != nil }}, done)
	if err != nil {
		return err
	}
	return v.settleReference(results)
}

// referenceRun names reference run i in progress lines.
func (v *verification) referenceRun(i int) string {
	return fmt.Sprintf("reference run %d/%d", i+1, v.o.opts.ReferenceRuns)
}

// settleReference judges the reference runs (referenceProblem) and, when
// they hold, keeps their times and the first as the reference.
func (v *verification) settleReference(results []*exercise.Result) error {
	if err := v.referenceProblem(results); err != nil {
		return err
	}
	for _, res := range results {
		v.es.Reference = append(v.es.Reference, res.Duration.Seconds())
	}
	v.ref = results[0]
	return nil
}

// referenceAgrees reports whether reference runs can hold so far: none
// ran out of time, the first can anchor and the rest agree with it
// (referenceProblem without its errors, for a goroutine that must not read
// the verification's state).
func referenceAgrees(results []*exercise.Result) bool {
	for i, res := range results {
		switch {
		case res.Verdict.ExitClass == verdict.Timeout:
			return false
		case i == 0 && res.Verdict.ReferenceProblem() != nil:
			return false
		case i > 0 && !res.Verdict.Same(results[0].Verdict):
			return false
		}
	}
	return true
}

// besideLanes is how many lanes the reference runs after the first get
// while the cross-check runs beside them, and the CPUs they may use: 0
// when the observer has no lane to spare (one lane is the cross-check's
// CPU), or the guest's free memory does not hold one more run, judged as
// lanes judges it.
func (v *verification) besideLanes(rest int, first *exercise.Result) (int, []int) {
	if rest == 0 || v.o.opts.Lanes < 2 {
		return 0, nil
	}
	avail, ok := machine.MeminfoMB("MemAvailable")["MemAvailable"]
	if !ok {
		return 0, nil
	}
	n := lanesFor(min(v.o.opts.Lanes, rest+1), avail, first.MaxRSSKiB) - 1
	if n < 1 {
		return 0, nil
	}
	if !v.o.opts.OneCPU {
		return n, nil
	}
	cpus, err := besideCPUs()
	if err != nil || len(cpus) == 0 {
		v.o.log.Warn("observe: no CPU beside the traced run's; the reference runs go first", "err", err)
		return 0, nil
	}
	return min(n, len(cpus)), cpus
}

// referenceProblem is the abort the reference runs so far call for, in
// order: a run out of time, a first run that cannot anchor the
// verification, or a later run that differs from the first; nil if none.
func (v *verification) referenceProblem(results []*exercise.Result) error {
	for i, res := range results {
		if res.Verdict.ExitClass == verdict.Timeout {
			return v.stopped
		}
		if i == 0 {
			if prob := res.Verdict.ReferenceProblem(); prob != nil {
				return engine.Abortf(map[string]any{"verdict": res.Verdict, "status": res.Status, "log": tail(res.Log)},
					"the reference run ran no tests or failed for an infrastructure reason: %v", prob)
			}
			continue
		}
		if !res.Verdict.Same(results[0].Verdict) {
			// The run's status and log say why it differs (a build that
			// died, a test that failed), which the verdicts alone do not.
			return engine.Abortf(map[string]any{"first": results[0].Verdict, "run": i + 1, "verdict": res.Verdict,
				"status": res.Status, "seconds": res.Duration.Seconds(), "log": tail(res.Log)},
				"flaky reference: reference run %d differs from the first", i+1)
		}
	}
	return nil
}

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

// observe runs the exercise under p with strace and the log-new-exec flag
// through the engine (engine.Run), collecting the run's records; records
// that cannot be trusted as complete abort (JudgeAudit).
func (v *verification) observe(ctx context.Context, kind string, p *policy.Policy) (*engine.Observed, error) {
	return v.observeRun(ctx, kind, v.es.Runs[kind]+1, p, func(ctx context.Context, prefix []string) (*exercise.Result, error) {
		return v.exRun(ctx, kind, prefix)
	})
}

// observeRun is observe with the run's number among its kind (in its
// scratch files' names) and what runs the exercise behind the prefix:
// exRun, or a run accounted for later.
func (v *verification) observeRun(ctx context.Context, kind string, nth int, p *policy.Policy,
	run func(ctx context.Context, prefix []string) (*exercise.Result, error)) (*engine.Observed, error) {
	o := v.o
	if o.opts.OneCPU {
		restore, err := pinOneCPU()
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := restore(); err != nil {
				o.log.Warn("observe: the CPUs after a traced run", "err", err)
			}
		}()
	}
	ob, err := engine.Run(ctx, engine.Spec{Policy: p, Exe: o.runExe, Scratch: o.scratch, Stem: fmt.Sprintf("%s.%s.%d", v.ex.Stem(), kind, nth),
		Kind: kind, LogSubprocesses: true, Collector: o.col, Wait: o.wait,
		Control: control.Options{PseudoTerminals: v.ex.Config.UsesPseudoTerminals, NoCreate: true},
		Run: func(ctx context.Context, prefix []string) (int, string, error) {
			res, err := run(ctx, prefix)
			if err != nil {
				return 0, "", err
			}
			return res.Status, "", nil
		}})
	if err != nil {
		return ob, err
	}
	if ae := engine.JudgeAudit(kind, ob.Audit); ae != nil {
		return ob, ae
	}
	return ob, nil
}

// crossCheck runs the narrowed policy observed and joins the two views.
func (v *verification) crossCheck(ctx context.Context, p *policy.Policy) (string, error) {
	ob, removed, err := v.crossCheckRun(ctx, p, &v.stopped)
	return v.crossCheckJudge(ob, removed, err)
}

// crossCheckRun makes the cross-check's run: the policy narrowed, observed.
// It returns the observation, how many grants the narrowing removed, and
// the run's error; crossCheckJudge takes them. A time-out of the run is
// noted in *stopped (account), when that is nil.
func (v *verification) crossCheckRun(ctx context.Context, p *policy.Policy, stopped **engine.TimeoutError) (*engine.Observed, int, error) {
	// The exercise contract starts /bin/bash: what it needs to start is
	// never taken away (else the run stops before the command starts).
	needed, err := StartNeeds(exercise.Interpreter)
	if err != nil {
		v.o.log.Warn("cross-check: what the interpreter needs to start is unknown; narrowing as Phobos does", "err", err)
	}
	narrowed, removed := policy.Narrowed(p, needed...)
	// The policy's own timeout bounds this run too, enforced by lockstep
	// run so that strace ends cleanly and its trace shows where it stopped.
	if l, ok := v.timed(p).Limits[policy.Timeout]; ok {
		narrowed.Limits[policy.Timeout] = l
	}
	v.o.progress("%s: cross-check run (%d of %d filesystem grants removed, strace + audit)", v.ex.Name, removed, len(p.FS))
	const kind = "cross-check"
	ob, err := v.observeRun(ctx, kind, v.es.Runs[kind]+1, narrowed, func(ctx context.Context, prefix []string) (*exercise.Result, error) {
		res, err := v.ex.Run(ctx, v.runOptions(prefix))
		if err != nil {
			return nil, err
		}
		return res, v.accountTo(stopped, kind, true, res)
	})
	return ob, removed, err
}

// crossCheckJudge records the cross-check's join and says why it fails
// the exercise, if it does.
func (v *verification) crossCheckJudge(ob *engine.Observed, removed int, err error) (string, error) {
	if err != nil {
		return "", v.stoppedOr(ob, "cross-check", err)
	}
	v.keepTrace("cross-check", ob.Trace)
	v.foretold = foretold(ob)
	cmp := ob.Join
	v.k.CrossCheck = cmp.Record()
	v.k.Mismatches, v.k.AuditOnly = cmp.Mismatches, cmp.AuditOnly
	v.es.Matched = matchedPairs(ob)
	v.o.progress("%s: cross-check: %d strace refusal(s), %d record(s), %d mismatch(es), %d audit-only",
		v.ex.Name, cmp.Compared, cmp.Records, len(cmp.Mismatches), len(cmp.AuditOnly))
	switch {
	case len(cmp.Mismatches) > 0:
		return fmt.Sprintf("the audit cross-check found %d strace denial(s) the kernel's records do not agree with", len(cmp.Mismatches)), nil
	case v.stopped != nil:
		return "", v.stopped
	case cmp.Compared == 0 && removed > 0:
		return fmt.Sprintf("the cross-check run was refused nothing strace could attribute, although it ran without %d grant(s) the policy holds, so nothing was compared", removed), nil
	}
	return "", nil
}

// keepTrace makes trace the exercise's .abi10.observed.trace.gz.
func (v *verification) keepTrace(run string, trace []byte) {
	v.trace = trace
	v.es.Trace = &TraceInfo{Run: run, SHA256: record.SHA256Hex(trace), Bytes: len(trace)}
}

// stoppedOr is the error of an observed run that failed: when the run ran
// out of time, the time-out (its trace kept, if it was read), else err.
func (v *verification) stoppedOr(ob *engine.Observed, run string, err error) error {
	if v.stopped == nil {
		return err
	}
	if ob != nil && ob.Trace != nil {
		v.keepTrace(run, ob.Trace)
	}
	return v.stopped
}

// stoppedJoint follows a joint run that ran out of time with one observed
// run of the same policy (strace + audit, the same bound), whose trace is
// kept, so that it shows where the run stopped; the exercise is
// inconclusive either way.
func (v *verification) stoppedJoint(ctx context.Context, p *policy.Policy) error {
	stopped := v.stopped
	v.o.progress("%s: the %s run ran out of time (%s); one observed run of the same policy shows where", v.ex.Name, stopped.Kind, stopped.Limit)
	ob, err := v.observe(ctx, "observed", v.timed(p))
	if err != nil {
		v.o.log.Warn("the observed re-run of a stopped joint run", "err", err)
	}
	if ob != nil && ob.Trace != nil {
		v.keepTrace("observed", ob.Trace)
	}
	return stopped
}

// difference sorts a diagnosis run's confirmed refusals into network rules
// and everything else.
func difference(ob *engine.Observed) Difference {
	var d Difference
	for _, r := range ob.Landlock {
		switch r.Layer {
		case attribute.Network:
			for _, n := range r.Net {
				if n.Section == policy.Bind {
					d.Bind = append(d.Bind, bindRule(n.Port, n.Transport))
				} else {
					d.Connect = append(d.Connect, fmt.Sprintf("allow %s:%d %s", n.Addr, n.Port, n.Transport))
				}
			}
		default:
			d.Other = append(d.Other, r.String())
		}
	}
	for _, r := range ob.Other {
		d.Other = append(d.Other, r.String())
	}
	d.Bind, d.Connect = engine.UniqueSorted(d.Bind), engine.UniqueSorted(d.Connect)
	return d
}

func rawRecords(recs []audit.Record, n int) []string {
	out := []string{}
	for i := range recs {
		if len(out) == n {
			break
		}
		if recs[i].Type == audit.TypeLandlockAccess {
			out = append(out, recs[i].String())
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

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

// matchedPairs are the cross-check's refusals that found their records, in
// trace order, each with them: what the report lists pair by pair.
func matchedPairs(ob *engine.Observed) []engine.Refusal {
	refusals, _, _ := engine.Join(ob, strings.Split(string(ob.Trace), "\n"))
	var out []engine.Refusal
	for _, r := range refusals {
		if len(r.Audit) > 0 {
			out = append(out, r)
		}
	}
	return out
}
