package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/repro"
)

func init() {
	guestRole(repro.GuestRole, "repro", reproHere)
	verbs.Register(&cli.Verb{
		Name:    "repro",
		Usage:   "repro --kernel {host|<pin>|<file>} --kernel {host|<pin>|<file>} --config <file>… [--base-dir <dir>] [--root <dir>] [--json] [--html <file>] -- <cmd>…",
		Short:   "the same command under the same policy on two kernels, refusals side by side",
		Long:    help("repro", nil),
		Example: example("repro"),
		Flags:   reproFlags,
	})
}

// reproArgs are repro's flags.
type reproArgs struct {
	kernels, configs                      cli.MultiFlag
	baseDir, root, accel, html, name, out *string
	cpus, mem                             *int
	timeout, bootTimeout, wait            *time.Duration
	asJSON, inGuest, quiet                *bool
}

// reproFlags declares repro's flags on fs and returns the verb.
func reproFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	a := &reproArgs{}
	fs.Var(cli.StrictList{Values: &a.kernels, Want: wantKernelOrHost}, "kernel", "`kernel`: host, a pin or a bzImage file (exactly twice)")
	pinsFlag(fs)
	fs.Var(&a.configs, "config", "policy `file` (repeatable)")
	a.baseDir = cli.StrictString(fs, "base-dir", "", "`dir`ectory whose Base*.cfg files come first", wantBaseDir)
	a.root = fs.String("root", "", "host `dir`ectory exported read-only as the guests' root (default /)")
	a.accel = fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	cpuFlag(fs)
	a.cpus = fs.Int("cpus", 1, "vCPUs per guest")
	a.mem = fs.Int("mem", 512, "guest memory in `MiB`")
	a.timeout = fs.Duration("timeout", 0, "bound on each guest's job (default: harness's, scaled to the accelerator)")
	a.bootTimeout = fs.Duration("boot-timeout", 0, "bound on each guest's boot (default: harness's, 60s under TCG)")
	a.wait = fs.Duration("wait", 0, "bound on the wait for each domain's deallocation record (default 30s)")
	a.html = fs.String("html", "", "write a self-contained HTML report to `file`")
	a.asJSON = fs.Bool("json", false, "print the result as one JSON document (schema 1)")
	a.quiet = fs.Bool("q", false, "quiet: no progress lines (a line as each kernel's side starts and ends, each guest's stages), only warnings and the result")
	a.inGuest = fs.Bool("in-guest", false, "internal: observe on the running kernel and write the observation to --out")
	a.name = fs.String("name", repro.HostKernel, "with --in-guest: the kernel's `name` in the observation")
	a.out = fs.String("out", "", "with --in-guest: `dir`ectory for the observation")
	return a.run
}

// run checks the flags, observes the command on both kernels and prints
// the comparison.
func (a *reproArgs) run(ctx context.Context, io *cli.Stdio, args []string) int {
	v := verbs["repro"]
	if len(args) == 0 {
		return cli.UsageExit(io, v, cli.Usagef("no command: give it after --"))
	}
	if *a.baseDir == "" && len(a.configs) == 0 {
		return cli.UsageExit(io, v, cli.Usagef("no policy: give --config (or --base-dir)"))
	}
	p, err := policy.Load(*a.baseDir, a.configs)
	if err != nil {
		return cli.Fail(io, "repro", cli.ExitUsage, err)
	}
	if *a.inGuest {
		return a.inGuestRun(ctx, io, v, p, args)
	}
	if len(a.kernels) != 2 {
		return cli.UsageExit(io, v, cli.Usagef("--kernel given %d time(s): want exactly two kernels", len(a.kernels)))
	}
	if err := checkAccel(*a.accel); err != nil {
		return cli.UsageExit(io, v, err)
	}
	io, end := io.WithDisplay("repro")
	defer end()
	log := io.ProgressLog("repro", *a.quiet)
	opts := repro.HostOptions{Policy: p, Command: args, Wait: *a.wait, Verbose: io.Verbose, Log: log,
		Sizing: harness.Sizing{Root: *a.root, Accel: *a.accel, CPUs: *a.cpus, MemMB: *a.mem, Timeout: *a.timeout, BootTimeout: *a.bootTimeout}}
	if io.Verbose {
		opts.Stderr = io.Err
	}
	if opts.Kernels, err = reproKernels(ctx, a.kernels, log); err != nil {
		return cli.Fail(io, "repro", cli.ExitIndeterminate, err)
	}
	t0 := time.Now()
	res, err := repro.Host(ctx, opts)
	if err != nil {
		return cli.Fail(io, "repro", cli.ExitIndeterminate, err)
	}
	if err := report.WriteFile(*a.html, func() ([]byte, error) {
		return report.Repro(res, report.Meta{Title: "lockstep repro", Started: t0, Seconds: time.Since(t0).Seconds()})
	}); err != nil {
		return cli.Fail(io, "repro", cli.ExitIndeterminate, err)
	}
	if *a.asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(io.Out, "%s\n", b)
	} else {
		report.ReproText(io.Out, res)
	}
	return res.Status
}

// inGuestRun is --in-guest: the guest side run by hand, on any machine
// given --out.
func (a *reproArgs) inGuestRun(ctx context.Context, io *cli.Stdio, v *cli.Verb, p *policy.Policy, args []string) int {
	dir, err := inGuestOut(*a.out)
	if err != nil {
		return cli.UsageExit(io, v, err)
	}
	return reproHere(ctx, io, repro.GuestOptions{Kernel: *a.name, Policy: p, Command: args, Wait: *a.wait, Out: dir})
}

// reproKernels resolves the two --kernel values: host as is, a pin or a
// bzImage file to its bzImage.
func reproKernels(ctx context.Context, kernels []string, log *slog.Logger) ([2]repro.Kernel, error) {
	var out [2]repro.Kernel
	for i, k := range kernels {
		out[i] = repro.Kernel{Name: k}
		if k == repro.HostKernel {
			continue
		}
		g, err := guestkernel.Resolve(ctx, k, log)
		if err != nil {
			return out, err
		}
		out[i].BzImage, out[i].Boot, out[i].Pin = g.BzImage, g.Boot, g.Pin
	}
	return out, nil
}

// reproHere is the in-guest side (repro.GuestRole, or --in-guest, which
// works on any machine with --out).
func reproHere(ctx context.Context, io *cli.Stdio, opts repro.GuestOptions) int {
	o, err := repro.Guest(ctx, opts)
	if err != nil {
		return cli.Fail(io, "repro", cli.ExitIndeterminate, err)
	}
	fmt.Fprintf(io.Err, "repro: %s (ABI %d, audit %v): status %d, %d refusal(s)\n", opts.Kernel, o.ABI, o.Audit, o.Status, len(o.Refusals))
	return cli.ExitOK
}
