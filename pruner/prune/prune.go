package prune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/pruner/cold"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
	"github.com/lockstep-sandbox/lockstep/record"
)

// Defaults of Options.
const (
	DefaultBaselineRuns     = 3
	DefaultVerificationRuns = 3
	DefaultThreshold        = placement.DefaultThreshold
)

// ErrNotDisposable is returned by Disposable (and Prune) on a machine that
// has not been declared disposable.
var ErrNotDisposable = errors.New("refusing to prune here: the pruner deletes and recreates its working directory and plants canary files; run it in a throwaway guest (what lockstep prune does by default) or set LOCKSTEP_DISPOSABLE=1 on a machine you can throw away")

// Disposable reports whether this machine may be changed by a prune:
// LOCKSTEP_DISPOSABLE=1, or LOCKSTEP_GUEST=1 (inside a lockstep guest).
func Disposable() error {
	if os.Getenv("LOCKSTEP_DISPOSABLE") == "1" || os.Getenv("LOCKSTEP_GUEST") == "1" {
		return nil
	}
	return ErrNotDisposable
}

// Options configures one prune. The zero value prunes as production does:
// working directory /var/tmp/testing-dir, this program as the enforcer and
// the containment probe (it calls ServeRoles), strace from PATH, every
// stage.
type Options struct {
	// Enforcer is the command prefix that applies a policy file; the
	// pipeline appends "--config", <file>, "--". Nil means
	// {os.Executable(), EnforcerVerb}: this program, which must then call
	// ServeRoles first thing in main. The lockstep CLI passes its own
	// {lockstep, "run"}.
	Enforcer []string
	// ColdRun is the program that serves the cold-run role (package cold:
	// every run in a mount namespace of its own, the system paths under
	// overlays thrown away after it); nil means {Enforcer[0]}, lockstep
	// itself or the program that calls ServeRoles. The pipeline appends
	// cold.Verb and its arguments. Its program also serves the baseline
	// runs' isolation (refns.Verb: lockstep and ServeRoles do).
	ColdRun []string
	// Strace is the strace binary; "" means "strace" from PATH.
	Strace string
	// WorkDir is where every run's fresh copy lives; "" means
	// exercise.DefaultWorkDir.
	WorkDir string
	// ScratchDir holds candidates and traces; "" means a new temporary
	// directory, removed at the end.
	ScratchDir string
	// SeedDir holds the seed files prune.json may name; "" means the seeds
	// shipped with lockstep (BuiltinSeeds).
	SeedDir string
	// Rounds is the grow budget; 0 means search.DefaultRounds.
	Rounds int
	// BaselineRuns and VerificationRuns, 0 means 3 each.
	BaselineRuns, VerificationRuns int
	// RunTimeout bounds one run; 0 means exercise.DefaultTimeout.
	RunTimeout time.Duration
	// SkipLimits leaves out the limits stage (the policy has no [limits]);
	// SkipContainment the containment checks. Both are recorded.
	SkipLimits, SkipContainment bool
	// CheckMinimality, after the joint verification, drops each grant of
	// the final policy in turn and runs the exercise: the record's
	// "minimality" entry lists the grants whose removal still passed (none,
	// for a 1-minimal policy). One run per grant.
	CheckMinimality bool
	// Contain configures the containment checks (zero: the default canaries
	// and probe caps).
	Contain ContainOptions
	// RootDigest is provenance.root_digest of the records: the digest of
	// the root file system the prune runs on (internal/rootdigest).
	RootDigest string
	// Now is the clock for the record's date; nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// Result is the outcome of one prune: a policy with its record, or an abort.
type Result struct {
	Key, Exercise string
	// Policy is the pruned policy (nil on abort); Cfg its file, header
	// included; Record the schema-2 record vouching for Cfg.
	Policy *policy.Policy
	Cfg    []byte
	Record *record.Exercise
	// Aborted is set instead when the prune aborted.
	Aborted *record.Aborted
	// Runs counts every run of the exercise, by stage.
	Runs map[string]int
	// Minimise is the minimisation's count.
	Minimise search.MinimiseStats
}

// TotalRuns is the number of exercise runs the prune took.
func (r *Result) TotalRuns() int {
	n := 0
	for _, v := range r.Runs {
		n += v
	}
	return n
}

// Write writes the result into dir: <stem>.cfg and <stem>.json, or
// <stem>.aborted.json, each atomically; a stale file of the other outcome is
// removed. It returns the paths written.
func (r *Result) Write(dir string) ([]string, error) {
	stem := r.Key + "_" + r.Exercise
	if r.Aborted != nil {
		for _, s := range []string{record.ConfigSuffix, record.ExerciseSuffix} {
			if err := os.Remove(filepath.Join(dir, stem+s)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		p, err := record.WriteAborted(dir, r.Aborted)
		if err != nil {
			return nil, err
		}
		return []string{p}, nil
	}
	if err := os.Remove(filepath.Join(dir, stem+record.AbortedSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	cfg := filepath.Join(dir, stem+record.ConfigSuffix)
	if err := safefile.WriteFile(cfg, r.Cfg, 0o644); err != nil {
		return nil, err
	}
	js, err := record.WriteExercise(dir, r.Record)
	if err != nil {
		return nil, err
	}
	return []string{cfg, js}, nil
}

// Prune prunes one exercise. The error is for what kept the pruner from
// starting (a machine not declared disposable, bad options, a cancelled
// context); everything else, a defect of the pruner included, is an abort in
// the Result.
func Prune(ctx context.Context, ex *exercise.Exercise, opts Options) (*Result, error) {
	if err := Disposable(); err != nil {
		return nil, err
	}
	s, err := newState(ex, opts)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &Result{Key: ex.Key, Exercise: ex.Name, Runs: s.runs}
	p, err := s.pipeline(ctx)
	res.Minimise = s.minStats
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		reason := err.Error()
		var ae *search.AbortError
		if !errors.As(err, &ae) {
			reason = "a defect of the pruner: " + reason
		}
		reason = strings.ReplaceAll(strings.ReplaceAll(reason, "\r", " "), "\n", "; ")
		s.logf("aborted: %s", reason)
		ev := map[string]any{"record": s.log}
		for k, v := range s.evidence {
			ev[k] = v
		}
		res.Aborted = &record.Aborted{SchemaVersion: record.ExerciseSchema, Key: ex.Key, Exercise: ex.Name,
			Stage: record.StageAll, Aborted: reason, Evidence: ev, Provenance: s.provenance(ctx)}
		if err := res.Aborted.Validate(); err != nil {
			return nil, fmt.Errorf("building the abort record: %w", err)
		}
		return res, nil
	}
	prov := s.provenance(ctx)
	final := p.Clone()
	final.Header = record.CfgHeader(ex.Key, ex.Name, record.StageAll, prov)
	cfg := final.Render()
	if _, err := policy.Parse(ex.Stem()+".cfg", cfg); err != nil {
		return nil, fmt.Errorf("the pruned policy does not parse back: %w", err)
	}
	res.Policy, res.Cfg = final, cfg
	res.Record = &record.Exercise{SchemaVersion: record.ExerciseSchema, Key: ex.Key, Exercise: ex.Name,
		Stage: record.StageAll, Provenance: prov, CfgSHA256: record.SHA256Hex(cfg),
		Policy: record.FromPolicy(final, nil), Log: s.log}
	if err := res.Record.Validate(); err != nil {
		return nil, fmt.Errorf("building the record: %w", err)
	}
	return res, nil
}

// state is one prune in progress.
type state struct {
	ex       *exercise.Exercise
	opts     Options
	log      []record.Entry
	evidence map[string]any
	runs     map[string]int
	runNo    int
	scratch  string
	ownTmp   bool
	// stage is the empty directory each cold run mounts its tmpfs on
	// (outside scratch, which every run keeps); cold the role's program.
	stage string
	cold  []string
	// iso is the baseline runs' isolation, after their cold prefix; nil
	// where they cannot be isolated (isolate).
	iso      []string
	enforcer []string
	strace   string
	workDir  string
	abi      int
	ref      *exercise.Result
	// started is when the prune began: a file born later is not pristine.
	started time.Time
	// what earlier runs showed
	executed      map[string]bool
	because       map[search.Item][]string
	minStats      search.MinimiseStats
	kept, removed []search.Item
	template      *policy.Policy
	// missingEvidence lists grants with no refusal behind them (a defect).
	missingEvidence []string
	limitHits       []policy.LimitKey
	// pinned are the pinned read roots with their manifests.
	pinned []pinnedRoot
	// keptItems are the kept seed's rows, granted by every candidate and
	// never minimised; keptComments their comments by path.
	keptItems    []search.Item
	keptComments map[string]string
	lg           *slog.Logger
	now          func() time.Time
	// onStart, while the limits are measured, gets the pid of each run's
	// process tree (the sampler's Watch): that tree alone is measured.
	onStart func(pid int)
}

func newState(ex *exercise.Exercise, opts Options) (*state, error) {
	s := &state{ex: ex, opts: opts, runs: map[string]int{}, evidence: map[string]any{},
		started: time.Now(), executed: map[string]bool{}, because: map[search.Item][]string{},
		lg: opts.Log, now: opts.Now}
	if s.lg == nil {
		s.lg = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.workDir = opts.WorkDir
	if s.workDir == "" {
		s.workDir = exercise.DefaultWorkDir
	}
	if !filepath.IsAbs(s.workDir) || filepath.Clean(s.workDir) != s.workDir || placement.Depth(s.workDir) < 2 {
		return nil, fmt.Errorf("working directory %q: want an absolute, clean path at depth 2 or deeper", s.workDir)
	}
	s.enforcer = opts.Enforcer
	if len(s.enforcer) == 0 {
		if !servesRoles.Load() {
			return nil, errNoRoles
		}
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable for the enforcer: %w", err)
		}
		s.enforcer = []string{self, EnforcerVerb}
	}
	s.strace = opts.Strace
	if s.strace == "" {
		s.strace = "strace"
	}
	abi, err := enforcer.HostABI()
	if err != nil {
		return nil, fmt.Errorf("this kernel's Landlock: %w", err)
	}
	s.abi = abi
	s.scratch = opts.ScratchDir
	if s.scratch == "" {
		d, err := os.MkdirTemp("", "lockstep-prune-")
		if err != nil {
			return nil, err
		}
		s.scratch, s.ownTmp = d, true
	} else if err := os.MkdirAll(s.scratch, 0o700); err != nil {
		return nil, err
	}
	if err := s.coldCheck(opts.ColdRun); err != nil {
		s.close()
		return nil, err
	}
	s.isolate()
	return s, nil
}

// isolate readies the baseline runs' isolation (package internal/refns,
// inside their cold root: root with no sandbox, they cannot reach this
// process, the scratch directory where later runs' traces are written,
// the exercise or the system's programs, and nothing they start outlives
// them) and tries it on /bin/true. Where a run cannot be isolated (no user
// namespaces, no right to map every id: not root) the baseline runs as
// before, and the log says so.
func (s *state) isolate() {
	path, err := exec.LookPath(s.cold[0])
	var ro []string
	for _, p := range []string{s.scratch, s.ex.Dir} {
		abs, aerr := filepath.Abs(p)
		err = errors.Join(err, aerr)
		ro = append(ro, abs)
	}
	if err == nil {
		iso := refns.CloneCommand(path, ro, nil)
		argv := append(append(cold.Command(s.cold, s.stage, []string{s.scratch}), iso...), "/bin/true")
		var out []byte
		if out, err = exec.Command(argv[0], argv[1:]...).CombinedOutput(); err == nil {
			s.iso = iso
			return
		}
		err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
	}
	s.lg.Warn("prune: the baseline runs are not isolated (they run as before, in this process's user and PID namespaces)", "err", err, "needs", refns.Hint)
}

// coldCheck makes the stage and runs /bin/true cold once, so a machine
// where runs cannot start cold (a container without CAP_SYS_ADMIN) refuses
// the prune before its first run, saying what it needs.
func (s *state) coldCheck(program []string) error {
	s.cold = program
	if len(s.cold) == 0 {
		s.cold = s.enforcer[:1]
	}
	d, err := os.MkdirTemp("", "lockstep-cold-")
	if err != nil {
		return err
	}
	s.stage = d
	argv := append(cold.Command(s.cold, s.stage, []string{s.scratch}), "/bin/true")
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("a cold run of /bin/true (%s): %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// coldPrefix is what every run starts with: the cold-run role keeping the
// working directory and the scratch directory.
func (s *state) coldPrefix() []string {
	return cold.Command(s.cold, s.stage, []string{s.workDir, s.scratch})
}

func (s *state) close() {
	if s.ownTmp {
		os.RemoveAll(s.scratch)
	}
	if s.stage != "" {
		os.Remove(s.stage)
	}
}

func (s *state) logf(format string, a ...any) {
	s.lg.Info(fmt.Sprintf(format, a...), "exercise", s.ex.Stem())
}

func (s *state) entry(stage string, fields any) {
	s.log = append(s.log, record.MustEntry(stage, fields))
}

func (s *state) provenance(ctx context.Context) record.Provenance {
	p := record.NewProvenance(s.now(), s.abi, record.StraceVersion(ctx))
	p.RootDigest = s.opts.RootDigest
	return p
}

// pipeline runs every stage and returns the final policy.
func (s *state) pipeline(ctx context.Context) (*policy.Policy, error) {
	start, err := s.beforeRuns()
	if err != nil {
		return nil, err
	}
	if err := s.baseline(ctx); err != nil {
		return nil, err
	}
	grown, err := s.grow(ctx, start)
	if err != nil {
		return nil, err
	}
	p, err := s.minimise(ctx, grown, start)
	if err != nil {
		return nil, err
	}
	if s.opts.SkipLimits {
		s.entry("limits", map[string]any{"skipped": "Options.SkipLimits"})
	} else if p, err = s.limits(ctx, p); err != nil {
		return nil, err
	}
	if err := s.checkPinnedWrites("the policy", p); err != nil {
		return nil, err
	}
	if err := s.verifyPinned("before the joint verification"); err != nil {
		return nil, err
	}
	if p, err = s.verify(ctx, p); err != nil {
		return nil, err
	}
	s.grantsEntry(p)
	if s.opts.CheckMinimality {
		if err := s.minimality(ctx, p); err != nil {
			return nil, err
		}
	}
	if len(s.missingEvidence) > 0 {
		return nil, fmt.Errorf("grants without a recorded refusal behind them: %s", strings.Join(s.missingEvidence, ", "))
	}
	if s.opts.SkipContainment {
		s.entry("containment", map[string]any{"checks": []any{}, "skipped": "Options.SkipContainment"})
	} else if err := s.contain(ctx, p); err != nil {
		return nil, err
	}
	if err := s.verifyPinned("after the last run"); err != nil {
		return nil, err
	}
	return p, nil
}

// beforeRuns is what comes before the first run: the start policy (seed), and
// the pinned roots loaded, checked against the seeds and re-hashed.
func (s *state) beforeRuns() (*policy.Policy, error) {
	start, err := s.seed()
	if err != nil {
		return nil, err
	}
	if err := s.loadPinned(); err != nil {
		return nil, err
	}
	if err := s.checkPinnedWrites("the seeds", start); err != nil {
		return nil, err
	}
	if err := s.verifyPinned("before the first run"); err != nil {
		return nil, err
	}
	return start, nil
}

// seed is the start policy: the seed file, if prune.json names one, the
// kept seed's rows, and the declared hosts' [connect] rules.
func (s *state) seed() (*policy.Policy, error) {
	p := &policy.Policy{}
	if name := s.ex.Config.Seed; name != "" {
		sp, err := readSeed(s.opts.SeedDir, name)
		if err != nil {
			return nil, &search.AbortError{Reason: fmt.Sprintf("seed %s: %v", name, err)}
		}
		var rows []string
		for _, it := range search.Items(sp) {
			if it.Path == "" || !(it.Section == policy.Read || it.Section == policy.Write || it.Section == policy.Create || it.Section == policy.Delete) {
				return nil, &search.AbortError{Reason: fmt.Sprintf("seed %s: %s: a seed holds only [read] [write] [create] [delete] rows", name, it)}
			}
			rows = append(rows, it.String())
			s.because[it] = append(s.because[it], "seed "+name)
		}
		p = search.Build(search.Items(sp), nil)
		s.entry("seed", map[string]any{"name": name, "rows": rows})
	}
	kept, comments, err := s.keptSeed()
	if err != nil {
		return nil, err
	}
	s.keptItems, s.keptComments = kept, comments
	p = s.withKept(search.Items(p), p)
	for _, r := range s.ex.SeedConnectRules() {
		p.Connect = append(p.Connect, r)
		s.because[search.Item{Section: policy.Connect, Rule: r.String()}] = []string{"declared host in prune.json"}
	}
	return p, nil
}

// baseline runs the reference unsandboxed.
func (s *state) baseline(ctx context.Context) error {
	n := s.opts.BaselineRuns
	if n <= 0 {
		n = DefaultBaselineRuns
	}
	for i := 1; i <= n; i++ {
		prefix := append(s.coldPrefix(), s.iso...)
		res, err := s.ex.Run(ctx, exercise.RunOptions{WorkDir: s.workDir, Prefix: prefix, Timeout: s.opts.RunTimeout, Log: s.lg})
		s.runs["baseline"]++
		if err != nil {
			return fmt.Errorf("baseline run %d: %w", i, err)
		}
		s.entry("baseline", record.BaselineEntry{Attempt: i, Status: res.Status, Verdict: res.Verdict})
		if err := res.Verdict.ReferenceProblem(); err != nil {
			s.evidence["log_tail"] = tail(res.Log, 4000)
			return &search.AbortError{Reason: fmt.Sprintf("baseline run %d: %v", i, err)}
		}
		if s.ref == nil {
			s.ref = res
		} else if !res.Verdict.Same(s.ref.Verdict) {
			return &search.AbortError{Reason: fmt.Sprintf("flaky reference: baseline run %d differs from run 1", i)}
		}
	}
	s.logf("baseline: %d runs agree, %d tests", n, len(s.ref.Verdict.Tests))
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ToValidUTF8(string(b), "?")
}
