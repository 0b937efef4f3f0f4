package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

func init() {
	guestRole(verify.GuestRole, "verify", verifyHere)
	register(&verb{
		Name:  "verify",
		Usage: "verify (--base <file> --exercises <dir> [--key <key>] [--exercise <name>…] | --base-dir <dir> [--key <key>…] [--exercises <dir>] [--plan | --summarise <dir>]) [--config <file>…] --kernel {<pin>|<file>}… [--joint-runs N] [--parallel N] [--tcg-time-factor N] [--json] [--html <file>]",
		Short: "a base policy on several kernels: every exercise of the key, a matrix of verdicts",
		Long:  verifyLong,
		Example: `# The generic base on the default pin and Debian trixie's 6.12
$ lockstep verify --base BaseLanguage-generic.cfg --kernel 7.2.13 --kernel 6.12.117 --exercises verify/testdata/exercises --key generic --html verify.html

# Every shipped base on every pin, from the repository's top
$ lockstep verify --base-dir bases --kernel 6.12.117 --kernel 7.2.13 --kernel 7.3.4

# The kernel matrix's plan, and its table from the legs' documents in legs/
$ lockstep verify --plan --base-dir bases --key generic --kernel 7.2.13
$ lockstep verify --summarise legs --base-dir bases --key generic --kernel 7.2.13 --html matrix.html`,
		Flags: verifyFlags,
	})
}

var verifyLong = `Checks the base (plus each --config, combined as lockstep run does) against every
exercise of the key on every kernel (a pin, built and cached on first use, or a
bzImage file). Each (kernel, exercise) cell is a fresh throwaway guest; the
guests run in parallel through the harness pool (--parallel bounds them; 1
runs them one after another). In each guest:

  1. a rule the kernel cannot enforce (a UDP row below Landlock ABI 10) fails
     the cell, naming the rule;
  2. one reference run unsandboxed, isolated in namespaces of its own so
     it cannot touch what the guest runs or writes after it (no tests, or
     an infrastructure failure: indeterminate);
  3. --joint-runs runs under the policy (every layer, the limits): each must
     reach the reference's verdict;
  4. if one did not: a diagnosis run under strace (and Landlock's audit
     records where the kernel offers them, ABI 7+) names every refused call,
     its object, rights, record and the row that would grant it: fail;
     if every one that did not ran out of time: inconclusive, no diagnosis;
  5. else containment: a canary file outside every grant stays unreadable, a
     TCP port no rule names stays unreachable: pass, or fail naming the check.

Every run is bounded by the policy's [limits] timeout; a run that runs out
of time makes the cell inconclusive (a time-out is no difference between the
kernels), unless a joint run had already disagreed without timing out. Under
TCG the runs' timeout and cpu limits are the policy's times
--tcg-time-factor (an emulated CPU is several times slower than the machine
that measured them; 1 keeps them), under KVM the policy's own; the
containment checks always keep the policy's own. A cell records the factor
(time_factor).

Prints the matrix kernel × exercise (pass, fail with the refused calls,
indeterminate or inconclusive with why). See docs/verify.md.

--base-dir DIR (the release engineer's one command) verifies every
BaseLanguage-<key>.cfg of the orchestrator's output DIR against its key's
exercises under --exercises (default testdata/exercises, the repository's
reference exercises): one matrix per base. Each exercise's cells add its
files from DIR/exercises: <key>_<ex>.cfg (its limits) on every kernel, and
<key>_<ex>.abi10.cfg (its ABI-10 rows) only on a pin of Landlock ABI 10 or
later, as a grading host applies them; the matrix says which each cell used.
Every base's cells run in one pool of guests; --key (repeatable) keeps only
those keys' bases.

--plan and --summarise DIR are the kernel-matrix workflow's plan and summary
(docs/ci.md): the bases of --base-dir (--key keeps some) × the pins of
--kernel (default: every pin). --plan prints the legs as one line of JSON,
{"kernels": [...], "legs": [{"base", "kernel"}, ...]}, and boots nothing;
--summarise reads the legs' --base-dir --json documents under DIR and prints
the bases × kernels table in Markdown (--json: as a document; --html: the
report page), a leg without a document "missing"; its status is the
table's (a missing leg: 3).

Exit status: 0 every cell passed; 1 any failed; 3 any indeterminate or
inconclusive and none failed; 2 usage.`

// verifyArgs are verify's flags.
type verifyArgs struct {
	kernels, configs, only, keys          multiFlag
	base, exercises, root, accel, html    *string
	name, out, baseDir, summarise         *string
	joint, parallel, cpus, mem, tcgFactor *int
	timeout, bootTimeout                  *time.Duration
	asJSON, inGuest, quiet, plan          *bool
}

// verifyFlags declares verify's flags on fs and returns the verb.
func verifyFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	a := &verifyArgs{}
	a.declare(fs)
	return a.run
}

// declare declares verify's flags on fs, into a.
func (a *verifyArgs) declare(fs *flag.FlagSet) {
	a.base = fs.String("base", "", "base policy `file` (required unless --base-dir)")
	a.baseDir = fs.String("base-dir", "", "verify every BaseLanguage-<key>.cfg of this `dir`ectory (the orchestrator's output) against its key's exercises, with each exercise's files there")
	fs.Var(&a.configs, "config", "further policy `file` (repeatable)")
	fs.Var(strictList{&a.kernels, wantKernel}, "kernel", "kernel `pin` or bzImage file (repeatable, at least one)")
	pinsFlag(fs)
	a.exercises = fs.String("exercises", "", "testing root `dir`ectory, <root>/<family>/<exercise> (required; with --base-dir, default "+referenceExercises+")")
	fs.Var(&a.keys, "key", "the `key` whose exercises to verify (default: the only key under --exercises); with --base-dir, only that key's base (repeatable)")
	fs.Var(&a.only, "exercise", "verify only the exercise `name`d (repeatable)")
	a.joint = fs.Int("joint-runs", verify.DefaultJointRuns, "runs under the policy per exercise")
	a.parallel = fs.Int("parallel", 0, "guests at once (0: as many as the host's CPUs allow; 1: one after another)")
	a.root = fs.String("root", "", "host `dir`ectory exported read-only as the guests' root (default /)")
	a.accel = fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	cpuFlag(fs)
	a.cpus = fs.Int("cpus", 1, "vCPUs per guest")
	a.mem = fs.Int("mem", 512, "guest memory in `MiB`")
	a.timeout = fs.Duration("timeout", 0, "bound on each guest's job (default: harness's, scaled to the accelerator)")
	a.bootTimeout = fs.Duration("boot-timeout", 0, "bound on each guest's boot (default: harness's, 60s under TCG)")
	a.tcgFactor = tcgTimeFactorFlag(fs)
	a.asJSON = fs.Bool("json", false, "print the result as one JSON document (schema 1)")
	a.quiet = fs.Bool("q", false, "quiet: no progress lines (a line per guest and stage), only warnings and the result")
	a.html = fs.String("html", "", "write a self-contained HTML report to `file`")
	a.plan = fs.Bool("plan", false, "with --base-dir: print the kernel matrix's plan, every base (--key keeps some) × every --kernel pin (default: every pin), as one line of JSON")
	a.summarise = fs.String("summarise", "", "with --base-dir: the plan's bases × kernels table, filled from the legs' --base-dir --json documents under this `dir`ectory (Markdown; --json, --html)")
	a.inGuest = fs.Bool("in-guest", false, "internal: verify one exercise on the running kernel, the cell to --out")
	a.name = fs.String("name", "", "with --in-guest: the kernel's `name` in the cell")
	a.out = fs.String("out", "", "with --in-guest: `dir`ectory for the cell")
}

// run checks the flags, verifies on every kernel and prints the matrix.
func (a *verifyArgs) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["verify"]
	if len(args) > 0 {
		return usageExit(io, v, usagef("unexpected arguments %q", args))
	}
	if *a.joint < 1 || *a.parallel < 0 {
		return usageExit(io, v, usagef("--joint-runs %d, --parallel %d: want at least 1 joint run and 0 or more guests at once", *a.joint, *a.parallel))
	}
	if *a.inGuest {
		return verifyInGuest(ctx, io, *a.name, *a.out, a.configs, *a.exercises, strings.Join(a.keys, ","), a.only, *a.joint)
	}
	if err := checkGuestFlags(*a.accel, *a.tcgFactor); err != nil {
		return usageExit(io, v, err)
	}
	switch {
	case *a.plan || *a.summarise != "":
		return a.runMatrix(io)
	case *a.baseDir != "":
		return a.runBaseDir(ctx, io)
	}
	return a.runBase(ctx, io)
}

// runBase verifies one base (--base) over its key's exercises.
func (a *verifyArgs) runBase(ctx context.Context, io *stdio) int {
	v := verbs["verify"]
	switch {
	case len(a.keys) > 1:
		return usageExit(io, v, usagef("--key %s: one key, or several with --base-dir", strings.Join(a.keys, " --key ")))
	case *a.base == "" || *a.exercises == "" || len(a.kernels) == 0:
		return usageExit(io, v, usagef("--base, --exercises and at least one --kernel are required"))
	}
	io, end := withProgressDisplay(io, "verify")
	defer end()
	files := append([]string{*a.base}, a.configs...)
	p, err := policy.Load("", files)
	if err != nil {
		return fail(io, "verify", exitUsage, err)
	}
	key := strings.Join(a.keys, "")
	if key == "" {
		if key, err = onlyKey(*a.exercises); err != nil {
			return usageExit(io, v, err)
		}
	}
	if err := checkExercisesNamed(*a.exercises, key, a.only); err != nil {
		return usageExit(io, v, err)
	}
	log := progressLogger(io, "verify", *a.quiet)
	opts := a.options(io, p, files)
	opts.Key, opts.Log = key, log
	if opts.Kernels, err = verifyKernels(ctx, a.kernels, log); err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	t0 := time.Now()
	res, err := verify.Host(ctx, opts)
	if err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	if err := writeReport(*a.html, func() ([]byte, error) {
		return report.Verify(res, report.Meta{Title: "lockstep verify: " + res.Key, Started: t0, Seconds: res.WallSeconds})
	}); err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "verify", res, res.Status, exitIndeterminate)
	}
	printVerify(io, res)
	return res.Status
}

// options are verify's options from the flags, without the kernels.
func (a *verifyArgs) options(io *stdio, p *policy.Policy, files []string) verify.HostOptions {
	opts := verify.HostOptions{Policy: p, Policies: files, Exercises: *a.exercises, Only: a.only, JointRuns: *a.joint,
		Parallel: *a.parallel, TCGTimeFactor: *a.tcgFactor, Verbose: io.verbose,
		Sizing: harness.Sizing{Root: *a.root, Accel: *a.accel, CPUs: *a.cpus, MemMB: *a.mem, Timeout: *a.timeout, BootTimeout: *a.bootTimeout}}
	if io.verbose {
		opts.Stderr = io.err
	}
	if !*a.quiet {
		log := progressLogger(io, "verify", false)
		opts.Progress = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	}
	return opts
}

// checkExercisesNamed refuses an --exercise the key does not have, before
// any kernel is fetched.
func checkExercisesNamed(root, key string, only []string) error {
	if len(only) == 0 {
		return nil
	}
	found, err := exercise.ForKey(root, key)
	if err == nil && len(found) == 0 {
		err = fmt.Errorf("no exercise of key %q under %s", key, root)
	}
	if err == nil {
		_, err = exercise.Named(found, only...)
	}
	if err != nil {
		return usagef("--exercise %v", err)
	}
	return nil
}

// verifyKernels resolves each --kernel to a bzImage, a pin with its ABI.
func verifyKernels(ctx context.Context, kernels []string, log *slog.Logger) ([]verify.Kernel, error) {
	var out []verify.Kernel
	for _, k := range kernels {
		g, err := resolveGuestKernel(ctx, k, log)
		if err != nil {
			return nil, err
		}
		kk := verify.Kernel{Name: k, BzImage: g.bz, Boot: g.boot}
		if pin, err := kernel.Lookup(k); err == nil {
			kk.Pin, kk.ABI = k, pin.ABI
		}
		out = append(out, kk)
	}
	return out, nil
}

// onlyKey is the key of every exercise under root, if there is one.
func onlyKey(root string) (string, error) {
	keys, err := exercise.Keys(root)
	if err != nil {
		return "", err
	}
	if len(keys) != 1 {
		return "", usagef("--key: %s holds %d keys (%s); name one", root, len(keys), strings.Join(keys, ", "))
	}
	return keys[0], nil
}

// verifyInGuest checks --in-guest's flags and runs verifyHere.
func verifyInGuest(ctx context.Context, io *stdio, name, out string, configs []string, exercises, key string, only []string, joint int) int {
	v := verbs["verify"]
	if len(configs) == 0 || exercises == "" || key == "" || len(only) != 1 {
		return usageExit(io, v, usagef("--in-guest needs --config, --exercises, --key and one --exercise"))
	}
	out, err := inGuestOut(out)
	if err != nil {
		return usageExit(io, v, err)
	}
	return verifyHere(ctx, io, verify.GuestOptions{Kernel: name, Configs: configs, Exercises: exercises, Key: key, Exercise: only[0],
		JointRuns: joint, Out: out})
}

// verifyHere is the in-guest side (verify.GuestRole, or --in-guest): one
// exercise on the running kernel.
func verifyHere(ctx context.Context, io *stdio, opts verify.GuestOptions) int {
	opts.Progress = func(format string, a ...any) { fmt.Fprintf(io.err, "verify: "+format+"\n", a...) }
	opts.Accel = os.Getenv(proto.EnvAccel)
	c, err := verify.Guest(ctx, opts)
	if err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	fmt.Fprintf(io.err, "verify: %s × %s: %s %s\n", opts.Kernel, c.Exercise, c.Verdict, c.Why)
	return exitOK
}

func printVerify(io *stdio, res *verify.Result) {
	w := 8
	for _, k := range res.Kernels {
		w = max(w, len(k.Name)+2)
	}
	fmt.Fprintf(io.out, "%-*s", w, "kernel")
	for _, e := range res.Exercises {
		fmt.Fprintf(io.out, "  %-20s", e)
	}
	fmt.Fprintln(io.out)
	for ki, k := range res.Kernels {
		fmt.Fprintf(io.out, "%-*s", w, k.Name)
		for ei := range res.Exercises {
			fmt.Fprintf(io.out, "  %-20s", res.Cell(ki, ei).Verdict)
		}
		fmt.Fprintln(io.out)
	}
	for _, c := range res.Cells {
		if c.Verdict == verify.Pass {
			continue
		}
		fmt.Fprintf(io.out, "\n%s × %s: %s: %s%s\n", c.Kernel, c.Exercise, c.Verdict, c.Why, timeFactorNote("; ", c.TimeFactor))
		if c.Diagnosis != nil {
			for _, r := range c.Diagnosis.Refusals {
				fmt.Fprintf(io.out, "  refused %s %s (%s); grant: %s\n", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","), strings.Join(r.Grant, "; "))
				for _, a := range r.Audit {
					fmt.Fprintf(io.out, "    audit: %s\n", a)
				}
			}
		}
	}
	fmt.Fprintf(io.out, "\nstatus %d: %d kernel(s) × %d exercise(s) in %.1f s wall (guests' own time %.1f s, parallel %d)\n",
		res.Status, len(res.Kernels), len(res.Exercises), res.WallSeconds, res.GuestSeconds, res.Parallel)
}
