package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/report"
)

func init() {
	guestRole(observer.GuestRole, "observe", observeHere)
	verbs.Register(&cli.Verb{
		Name:    "observe",
		Usage:   "observe --key <key> --exercises <dir> --path-sets <dir> [--kernel <pin>|<file>] [--root <dir>] [--accel {auto|kvm|tcg}] [--cpu <model>] [--cpus N] [--mem MiB] [--timeout D] [--tcg-time-factor N] [--html <file>]",
		Short:   "the KVM run: cross-check strace against Landlock's audit records in a guest, write ABI-10 sidecars",
		Long:    help("observe", nil),
		Example: example("observe"),
		Flags:   observeFlags,
	})
}

func observeFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	key := fs.String("key", "", "the `key` whose exercises to observe, or all: every key, each in <path-sets>/<key> (required)")
	exercises := fs.String("exercises", "", "testing root `dir`ectory, <root>/<family>/<exercise> (required)")
	pathSets := fs.String("path-sets", "", "`dir`ectory with the default prune's <key>_<ex>.cfg and .json; receives the results (required)")
	kernelArg := cli.StrictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file", wantKernel)
	pinsFlag(fs)
	root := fs.String("root", "", "host `dir`ectory exported read-only as the guest's root (default /)")
	accel := fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	cpuFlag(fs)
	cpus := fs.Int("cpus", 2, "guest vCPUs")
	mem := fs.Int("mem", 1024, "guest memory in `MiB`")
	timeout := fs.Duration("timeout", 0, "bound on the guest's job (default: harness's, scaled to the accelerator)")
	tcgFactor := tcgTimeFactorFlag(fs)
	inGuest := fs.Bool("in-guest", false, "run the observer on the running kernel (what the guest runs)")
	out := fs.String("out", "", "with --in-guest: `dir`ectory for the results (default /run/lockstep/results in a guest)")
	wantABI := fs.Int("want-abi", 0, "with --in-guest: the pin's Landlock `abi` (default: the default pin's)")
	wantRelease := fs.String("want-release", "", "with --in-guest: the `release` uname -r must say (empty: not checked)")
	html := fs.String("html", "", "also write a self-contained HTML report of the run to `file`")
	backlog := fs.Uint("backlog-limit", 0, "with --in-guest: the audit backlog `limit` to set (default 8192; tests lower it)")
	rootDigest := fs.String("root-digest", "", "with --in-guest: provenance.root_digest of the records, the `digest` the host took of the guest's root (default: taken of / here)")
	return func(ctx context.Context, io *cli.Stdio, args []string) int {
		v := verbs["observe"]
		if len(args) > 0 {
			return cli.UsageExit(io, v, cli.Usagef("unexpected arguments %q", args))
		}
		if *key == "" || *exercises == "" || *pathSets == "" {
			return cli.UsageExit(io, v, cli.Usagef("--key, --exercises and --path-sets are required"))
		}
		if *wantABI == 0 {
			pin, err := kernel.Lookup(kernel.DefaultPin)
			if err != nil {
				return cli.Fail(io, "observe", cli.ExitFail, err)
			}
			*wantABI = pin.ABI
		}
		if *inGuest {
			if *key == allKeys {
				return cli.UsageExit(io, v, cli.Usagef("--key %s is the host's: the guest observes one key", allKeys))
			}
			dir, err := inGuestOut(*out)
			if err != nil {
				return cli.UsageExit(io, v, err)
			}
			digest, err := rootDigestFlag(*rootDigest)
			if err != nil {
				return rootDigestExit(io, v, err)
			}
			return observeHere(ctx, io, observer.GuestOptions{Key: *key, Exercises: *exercises, PathSets: *pathSets, Out: dir,
				WantABI: *wantABI, WantRelease: *wantRelease, BacklogLimit: uint32(*backlog), RootDigest: digest})
		}
		if err := checkGuestFlags(*accel, *tcgFactor); err != nil {
			return cli.UsageExit(io, v, err)
		}
		opts := observer.HostOptions{Key: *key, Exercises: *exercises, PathSets: *pathSets, TCGTimeFactor: *tcgFactor,
			Sizing: harness.Sizing{Root: *root, Accel: *accel, CPUs: *cpus, MemMB: *mem, Timeout: *timeout}, Verbose: io.Verbose}
		if *key == allKeys {
			return observeAll(ctx, io, *kernelArg, *html, opts)
		}
		return observeHost(ctx, io, *kernelArg, *html, opts)
	}
}

// observeHere is the in-guest observer (observer.GuestRole, or --in-guest).
func observeHere(ctx context.Context, io *cli.Stdio, opts observer.GuestOptions) int {
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	// The role's options carry the host's digest; a job without one
	// (run by hand) takes the digest of / here, as --in-guest does.
	digest, err := rootDigestFlag(opts.RootDigest)
	if err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	opts.RootDigest, opts.Progress, opts.Log = digest, io.Err, io.GuestLog("observe")
	opts.Accel = os.Getenv(proto.EnvAccel)
	sum, err := observer.Guest(ctx, opts)
	if err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	if sum.Reason != "" {
		fmt.Fprintf(io.Err, "lockstep observe: %s\n", sum.Reason)
	}
	return sum.Status
}

// observeHost boots the kernel with the in-guest observer as the job.
func observeHost(ctx context.Context, io *cli.Stdio, kernelArg, html string, opts observer.HostOptions) int {
	log := io.GuestLog("observe")
	g, err := guestkernel.Resolve(ctx, kernelArg, log)
	if err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	bz := g.BzImage
	opts.Boot = g.Boot
	if opts.WantABI, err = guestkernel.PinABI(kernelArg); err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	if opts.WantRelease, err = guestkernel.Release(bz); err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	opts.Pin = g.Pin
	opts.Kernel, opts.Stderr, opts.Log = bz, io.Err, log
	t0 := time.Now()
	res, err := observer.Host(ctx, opts)
	if err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	report.ObserveText(io.Out, res, opts.Key)
	if res.Reason != "" {
		fmt.Fprintf(io.Err, "lockstep observe: %s\n", res.Reason)
	}
	fmt.Fprintf(io.Out, "status %d in %.1f s (accel %s%s); results in %s\n", res.Status, time.Since(t0).Seconds(), res.Run.Accel,
		report.TimeFactorNote(", ", report.ObserveFactor(res)), filepath.Clean(opts.PathSets))
	render := func() ([]byte, error) {
		return report.Observe(res, opts.Key, opts.PathSets, report.Meta{Started: t0, Seconds: time.Since(t0).Seconds(), Dir: filepath.Dir(html)})
	}
	if err := report.WriteFile(html, render); err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	if html != "" {
		fmt.Fprintf(io.Out, "report: %s\n", html)
	}
	return res.Status
}
