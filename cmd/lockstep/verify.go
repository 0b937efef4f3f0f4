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
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

func init() {
	guestRole(verify.GuestRole, "verify", verifyHere)
	verbs.Register(&cli.Verb{
		Name:    "verify",
		Usage:   "verify (--base <file> --exercises <dir> [--key <key>] [--exercise <name>…] | --base-dir <dir> [--key <key>…] [--exercises <dir>] [--plan | --summarise <dir>]) [--config <file>…] --kernel {<pin>|<file>}… [--joint-runs N] [--parallel N] [--tcg-time-factor N] [--json] [--html <file>]",
		Short:   "a base policy on several kernels: every exercise of the key, a matrix of verdicts",
		Long:    help("verify", nil),
		Example: example("verify"),
		Flags:   verifyFlags,
	})
}

// verifyArgs are verify's flags.
type verifyArgs struct {
	kernels, configs, only, keys          cli.MultiFlag
	base, exercises, root, accel, html    *string
	name, out, baseDir, summarise         *string
	joint, parallel, cpus, mem, tcgFactor *int
	timeout, bootTimeout                  *time.Duration
	asJSON, inGuest, quiet, plan          *bool
}

// verifyFlags declares verify's flags on fs and returns the verb.
func verifyFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	a := &verifyArgs{}
	a.declare(fs)
	return a.run
}

// declare declares verify's flags on fs, into a.
func (a *verifyArgs) declare(fs *flag.FlagSet) {
	a.base = fs.String("base", "", "base policy `file` (required unless --base-dir)")
	a.baseDir = fs.String("base-dir", "", "verify every BaseLanguage-<key>.cfg of this `dir`ectory (the orchestrator's output) against its key's exercises, with each exercise's files there")
	fs.Var(&a.configs, "config", "further policy `file` (repeatable)")
	fs.Var(cli.StrictList{Values: &a.kernels, Want: wantKernel}, "kernel", "kernel `pin` or bzImage file (repeatable, at least one)")
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
func (a *verifyArgs) run(ctx context.Context, io *cli.Stdio, args []string) int {
	v := verbs["verify"]
	if len(args) > 0 {
		return cli.UsageExit(io, v, cli.Usagef("unexpected arguments %q", args))
	}
	if *a.joint < 1 || *a.parallel < 0 {
		return cli.UsageExit(io, v, cli.Usagef("--joint-runs %d, --parallel %d: want at least 1 joint run and 0 or more guests at once", *a.joint, *a.parallel))
	}
	if *a.inGuest {
		return verifyInGuest(ctx, io, *a.name, *a.out, a.configs, *a.exercises, strings.Join(a.keys, ","), a.only, *a.joint)
	}
	if err := checkGuestFlags(*a.accel, *a.tcgFactor); err != nil {
		return cli.UsageExit(io, v, err)
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
func (a *verifyArgs) runBase(ctx context.Context, io *cli.Stdio) int {
	v := verbs["verify"]
	switch {
	case len(a.keys) > 1:
		return cli.UsageExit(io, v, cli.Usagef("--key %s: one key, or several with --base-dir", strings.Join(a.keys, " --key ")))
	case *a.base == "" || *a.exercises == "" || len(a.kernels) == 0:
		return cli.UsageExit(io, v, cli.Usagef("--base, --exercises and at least one --kernel are required"))
	}
	io, end := io.WithDisplay("verify")
	defer end()
	files := append([]string{*a.base}, a.configs...)
	p, err := policy.Load("", files)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitUsage, err)
	}
	key := strings.Join(a.keys, "")
	if key == "" {
		if key, err = onlyKey(*a.exercises); err != nil {
			return cli.UsageExit(io, v, err)
		}
	}
	if err := exercise.CheckNamed(*a.exercises, key, a.only); err != nil {
		return cli.UsageExit(io, v, cli.Usagef("--exercise %v", err))
	}
	log := io.ProgressLog("verify", *a.quiet)
	opts := a.options(io, p, files)
	opts.Key, opts.Log = key, log
	if opts.Kernels, err = verifyKernels(ctx, a.kernels, log); err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	t0 := time.Now()
	res, err := verify.Host(ctx, opts)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	if err := report.WriteFile(*a.html, func() ([]byte, error) {
		return report.Verify(res, report.Meta{Title: "lockstep verify: " + res.Key, Started: t0, Seconds: res.WallSeconds})
	}); err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "verify", res, res.Status, cli.ExitIndeterminate)
	}
	report.VerifyText(io.Out, res)
	return res.Status
}

// options are verify's options from the flags, without the kernels.
func (a *verifyArgs) options(io *cli.Stdio, p *policy.Policy, files []string) verify.HostOptions {
	opts := verify.HostOptions{Policy: p, Policies: files, Exercises: *a.exercises, Only: a.only, JointRuns: *a.joint,
		Parallel: *a.parallel, TCGTimeFactor: *a.tcgFactor, Verbose: io.Verbose,
		Sizing: harness.Sizing{Root: *a.root, Accel: *a.accel, CPUs: *a.cpus, MemMB: *a.mem, Timeout: *a.timeout, BootTimeout: *a.bootTimeout}}
	if io.Verbose {
		opts.Stderr = io.Err
	}
	if !*a.quiet {
		log := io.ProgressLog("verify", false)
		opts.Progress = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	}
	return opts
}

// verifyKernels resolves each --kernel to a bzImage, a pin with its ABI.
func verifyKernels(ctx context.Context, kernels []string, log *slog.Logger) ([]verify.Kernel, error) {
	var out []verify.Kernel
	for _, k := range kernels {
		g, err := guestkernel.Resolve(ctx, k, log)
		if err != nil {
			return nil, err
		}
		out = append(out, verify.Kernel{Name: k, BzImage: g.BzImage, Boot: g.Boot, Pin: g.Pin, ABI: g.ABI})
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
		return "", cli.Usagef("--key: %s holds %d keys (%s); name one", root, len(keys), strings.Join(keys, ", "))
	}
	return keys[0], nil
}

// verifyInGuest checks --in-guest's flags and runs verifyHere.
func verifyInGuest(ctx context.Context, io *cli.Stdio, name, out string, configs []string, exercises, key string, only []string, joint int) int {
	v := verbs["verify"]
	if len(configs) == 0 || exercises == "" || key == "" || len(only) != 1 {
		return cli.UsageExit(io, v, cli.Usagef("--in-guest needs --config, --exercises, --key and one --exercise"))
	}
	out, err := inGuestOut(out)
	if err != nil {
		return cli.UsageExit(io, v, err)
	}
	return verifyHere(ctx, io, verify.GuestOptions{Kernel: name, Configs: configs, Exercises: exercises, Key: key, Exercise: only[0],
		JointRuns: joint, Out: out})
}

// verifyHere is the in-guest side (verify.GuestRole, or --in-guest): one
// exercise on the running kernel.
func verifyHere(ctx context.Context, io *cli.Stdio, opts verify.GuestOptions) int {
	opts.Progress = func(format string, a ...any) { fmt.Fprintf(io.Err, "verify: "+format+"\n", a...) }
	opts.Accel = os.Getenv(proto.EnvAccel)
	c, err := verify.Guest(ctx, opts)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	fmt.Fprintf(io.Err, "verify: %s × %s: %s %s\n", opts.Kernel, c.Exercise, c.Verdict, c.Why)
	return cli.ExitOK
}
