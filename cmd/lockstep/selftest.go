package main

import (
	"context"
	"errors"
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
	"github.com/lockstep-sandbox/lockstep/observer/proof"
	"github.com/lockstep-sandbox/lockstep/selftest"
)

func init() {
	envRoles[proof.Role] = proof.RefusalMain
	guestRole(selftest.GuestRole, "selftest", selftestRole)
	verbs.Register(&cli.Verb{
		Name:    "selftest",
		Usage:   "selftest [--kernel <pin>|<file>] [--modules <dir>] [--machine {microvm|q35}] [--accel {auto|kvm|tcg}] [--cpu <model>] [--boot-timeout <d>] [--results <dir>] [--json]",
		Short:   "boot a guest and prove its kernel: release, LSM list, ABI, audit, one refusal per right → one record",
		Long:    help("selftest", nil),
		Example: example("selftest"),
		Flags:   selftestFlags,
	})
}

func selftestFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	kernelArg := cli.StrictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file", wantKernel)
	pinsFlag(fs)
	accel := fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	cpuFlag(fs)
	modules := fs.String("modules", "", "a distribution kernel's /lib/modules/<release> `dir` (virtio, 9p, overlayfs are modules there; use with --machine q35)")
	machine := fs.String("machine", harness.MachineMicrovm, "QEMU `machine`: microvm or q35")
	results := fs.String("results", "", "`dir`ectory to keep selftest.json, selftest-records.txt and run.json")
	asJSON := fs.Bool("json", false, "print the report as JSON (schema 1) instead of a table")
	inGuest := fs.Bool("in-guest", false, "run the checks on the running kernel (what the guest runs)")
	wantRelease := fs.String("want-release", "", "with --in-guest: the `release` uname -r must equal (empty: not checked)")
	wantABI := fs.Int("want-abi", 0, "with --in-guest: the pin's Landlock `abi` (default: the default pin's)")
	scenarios := fs.String("scenarios", "", "with --in-guest: only run every refusal and capture scenario (no proof, no collector), naming the children in `dir`/cases.txt, for capturing another audit daemon's log")
	capture := fs.String("capture", "", "with --in-guest: after the proof, capture every record form of every refusal and capture scenario into `dir` (test data)")
	bootTimeout := fs.Duration("boot-timeout", 0, "`duration` from QEMU's start to the guest's first event (default: harness's, by accelerator)")
	quiet := fs.Bool("q", false, "quiet: no progress lines (a line per stage of the guest's boot), only warnings and the report")
	return func(ctx context.Context, io *cli.Stdio, args []string) int {
		v := verbs["selftest"]
		if len(args) > 0 {
			return cli.UsageExit(io, v, cli.Usagef("unexpected arguments %q", args))
		}
		if *wantABI == 0 {
			pin, err := kernel.Lookup(kernel.DefaultPin)
			if err != nil {
				return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
			}
			*wantABI = pin.ABI
		}
		if *inGuest && *scenarios != "" {
			if err := proof.RunScenarios(ctx, proof.CaptureOptions{Out: *scenarios}); err != nil {
				return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
			}
			return cli.ExitOK
		}
		if *inGuest {
			out := *results
			if out == "" && os.Getenv(proto.EnvGuest) == "1" {
				out = proto.ResultsDir
			}
			code := selftestHere(ctx, io, selftest.GuestOptions{WantRelease: *wantRelease, WantABI: *wantABI, Out: out}, *asJSON)
			if *capture != "" {
				if err := proof.Capture(ctx, proof.CaptureOptions{Out: *capture}); err != nil {
					return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
				}
			}
			return code
		}
		if err := checkAccel(*accel); err != nil {
			return cli.UsageExit(io, v, err)
		}
		if *bootTimeout < 0 {
			return cli.UsageExit(io, v, cli.Usagef("--boot-timeout %v: want a duration of 0 or more", *bootTimeout))
		}
		return selftestGuest(ctx, io, selftestBoot{kernel: *kernelArg, modules: *modules, machine: *machine, accel: *accel, results: *results,
			bootTimeout: *bootTimeout, quiet: *quiet}, *asJSON)
	}
}

// selftestHere runs the proof on the running kernel (selftest.Guest) and
// prints the report.
func selftestHere(ctx context.Context, io *cli.Stdio, opts selftest.GuestOptions, asJSON bool) int {
	opts.Log = io.GuestLog("selftest")
	rep, err := selftest.Guest(ctx, opts)
	if err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	if err := rep.Write(io.Out, asJSON); err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	return rep.Status
}

// selftestRole is the selftest's guest side (selftest.GuestRole): the
// report as JSON on stdout, as the host's job always asked.
func selftestRole(ctx context.Context, io *cli.Stdio, opts selftest.GuestOptions) int {
	return selftestHere(ctx, io, opts, true)
}

// selftestBoot is how the selftest's guest boots.
type selftestBoot struct {
	kernel, modules, machine, accel, results string
	bootTimeout                              time.Duration
	quiet                                    bool
}

// selftestGuest boots the kernel with the selftest's guest side as the job
// (selftest.Host) and prints the report it wrote.
func selftestGuest(ctx context.Context, io *cli.Stdio, b selftestBoot, asJSON bool) int {
	io, end := io.WithDisplay("selftest")
	defer end()
	log := io.ProgressLog("selftest", b.quiet)
	g, err := guestkernel.Resolve(ctx, b.kernel, log)
	if err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	bz := g.BzImage
	opts := selftest.HostOptions{Kernel: bz, Machine: b.machine, Results: b.results, Sizing: harness.Sizing{Accel: b.accel, BootTimeout: b.bootTimeout},
		Stderr: io.Err, Verbose: io.Verbose, Log: log}
	if opts.Modules, err = guestkernel.Modules(b.modules); err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	if g.Boot.Modules != nil {
		if opts.Modules != nil {
			return cli.Fail(io, "selftest", cli.ExitUsage, fmt.Errorf("--modules: pin %s is Debian's image and brings its own", b.kernel))
		}
		opts.Modules, opts.Machine = g.Boot.Modules, g.Boot.Machine
	}
	if opts.WantABI, err = guestkernel.PinABI(b.kernel); err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	if opts.WantRelease, err = guestkernel.Release(bz); err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	if io.Verbose {
		opts.Stdout = io.Err // the report is read from the results, not the console
	}
	log.Info(fmt.Sprintf("kernel %s (%s): booting a guest to prove it", opts.WantRelease, filepath.Base(bz)))
	res, err := selftest.Host(ctx, opts)
	if err != nil {
		code := cli.ExitIndeterminate
		if res != nil && errors.Is(err, harness.ErrGuestSetup) {
			code = cli.ExitGuestSetup
		}
		return cli.Fail(io, "selftest", code, err)
	}
	if !asJSON {
		fmt.Fprintf(io.Out, "kernel %s (%s), accel %s\n", opts.WantRelease, filepath.Base(bz), res.Run.Accel)
	}
	if err := res.Report.Write(io.Out, asJSON); err != nil {
		return cli.Fail(io, "selftest", cli.ExitIndeterminate, err)
	}
	return res.Report.Status
}
