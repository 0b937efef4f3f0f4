package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "boot",
		Usage:   "boot [--kernel <pin>|<file>] [--root <dir> | --root-image <file>] [--share <src>[:<guestpath>]]… [--accel {auto|kvm|tcg}] [--cpu <model>] [--mem <MiB>] [--cpus <n>] [--timeout <duration>] [--boot-timeout <duration>] [--results <dir>] -- <cmd>…",
		Short:   "run one command in a throwaway guest; its output and status come back",
		Long:    help("boot", bootHelp()),
		Example: example("boot"),
		Flags:   bootFlags,
	})
}

type shareFlag []harness.Share

func (s *shareFlag) String() string {
	var p []string
	for _, sh := range *s {
		p = append(p, sh.Source+":"+sh.GuestPath)
	}
	return strings.Join(p, ",")
}

func (s *shareFlag) Set(v string) error {
	src, guestPath, _ := strings.Cut(v, ":")
	if guestPath == "ro" { // SRC:ro is accepted: every share is read-only
		guestPath = ""
	}
	if src == "" {
		return errors.New("want SRC[:GUESTPATH]")
	}
	*s = append(*s, harness.Share{Source: src, GuestPath: guestPath})
	return nil
}

// bootArgs are boot's flags.
type bootArgs struct {
	fs                                                          *flag.FlagSet
	shares                                                      shareFlag
	kernel, root, rootImage, accel, cpu, results, machine, mods *string
	mem, cpus                                                   *int
	timeout, bootTimeout                                        *time.Duration
}

// bootFlags declares boot's flags on fs and returns the verb.
func bootFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	b := &bootArgs{fs: fs}
	b.kernel = cli.StrictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` (a version from kernel/pins.txt) or a bzImage file", wantKernel)
	pinsFlag(fs)
	b.root = fs.String("root", "/", "host `dir`ectory that becomes the guest's read-only root")
	b.rootImage = fs.String("root-image", "", "raw ext4 disk image `file` (as mkfs.ext4 -d makes) that becomes the guest's read-only root instead of --root; the kernel needs virtio-blk and ext4")
	fs.Var(&b.shares, "share", "read-only host directory `src[:guestpath]` (repeatable)")
	b.accel = fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	b.cpu = fs.String("cpu", "", cpuUsage)
	b.mem = fs.Int("mem", 512, "guest memory in `MiB`")
	b.cpus = fs.Int("cpus", 1, "guest vCPUs")
	b.timeout = fs.Duration("timeout", 0, "job `duration` limit (default 10m, ×10 under TCG)")
	b.bootTimeout = fs.Duration("boot-timeout", 0, fmt.Sprintf("`duration` from QEMU's start to the guest's first event (default %v under KVM, %v under TCG)",
		harness.BootDeadlines[harness.AccelKVM], harness.BootDeadlines[harness.AccelTCG]))
	b.results = fs.String("results", "", "`dir`ectory for /run/lockstep/results, run.json and forensics")
	b.machine = fs.String("machine", harness.MachineMicrovm, "QEMU `machine`: microvm or q35")
	b.mods = fs.String("modules", "", "a distribution kernel's /lib/modules/<release> `dir`: load virtio, 9p and overlayfs from it (use with --machine q35)")
	return b.run
}

// run checks the flags, boots the guest and reports how it went.
func (b *bootArgs) run(ctx context.Context, io *cli.Stdio, args []string) int {
	v := verbs["boot"]
	if err := b.check(args); err != nil {
		return cli.UsageExit(io, v, err)
	}
	log := io.GuestLog("boot")
	var extra []string
	if *b.rootImage != "" {
		extra = harness.RootImageModules
	}
	g, err := guestkernel.Resolve(ctx, *b.kernel, log, extra...)
	if err != nil {
		return cli.Fail(io, "boot", cli.ExitFail, err) // as --help says: the kernel could not be had
	}
	bz := g.BzImage
	rootDir, err := b.rootDir()
	if err != nil {
		return cli.UsageExit(io, v, err)
	}
	mods, err := b.modules()
	if err != nil {
		return cli.Fail(io, "boot", cli.ExitGuestSetup, err)
	}
	machine := *b.machine
	if g.Boot.Modules != nil {
		if mods != nil {
			return cli.UsageExit(io, v, cli.Usagef("--modules: pin %s is Debian's image and brings its own", *b.kernel))
		}
		mods, machine = g.Boot.Modules, g.Boot.Machine
	}
	dir := ""
	if rootDir == "/" {
		dir, _ = os.Getwd()
	}
	res, err := harness.Run(ctx, harness.Options{
		Kernel: bz, Root: rootDir, RootImage: *b.rootImage, Shares: b.shares, Accel: *b.accel, CPU: *b.cpu, Machine: machine,
		MemMB: *b.mem, CPUs: *b.cpus, Timeout: *b.timeout, BootTimeout: *b.bootTimeout, Command: args, Dir: dir, Modules: mods,
		Stdout: io.Out, Stderr: io.Err, ResultsDir: *b.results, Verbose: io.Verbose, Log: log,
	})
	return bootExit(ctx, io, log, res, err)
}

// check refuses a missing command and out-of-range values.
func (b *bootArgs) check(args []string) error {
	if len(args) == 0 {
		return cli.Usagef("no command given after --")
	}
	if err := checkAccel(*b.accel); err != nil {
		return err
	}
	switch {
	case *b.mem < 64:
		return cli.Usagef("--mem %d: want at least 64 (MiB)", *b.mem)
	case *b.cpus < 1:
		return cli.Usagef("--cpus %d: want at least 1", *b.cpus)
	case *b.timeout < 0:
		return cli.Usagef("--timeout %v: want a duration of 0 or more", *b.timeout)
	case *b.bootTimeout < 0:
		return cli.Usagef("--boot-timeout %v: want a duration of 0 or more", *b.bootTimeout)
	}
	return nil
}

// rootDir is the guest's root directory, "" when --root-image replaces it;
// a usage error when both are given, or an image without a kernel that can
// mount it.
func (b *bootArgs) rootDir() (string, error) {
	if *b.rootImage == "" {
		return *b.root, nil
	}
	rootSet := false
	b.fs.Visit(func(f *flag.Flag) { rootSet = rootSet || f.Name == "root" })
	if rootSet {
		return "", cli.Usagef("--root and --root-image exclude each other")
	}
	if *b.mods == "" {
		if p, err := kernel.Lookup(*b.kernel); err == nil && p.Source != kernel.SourceDebianImage {
			return "", cli.Usagef("--root-image needs a kernel with virtio-blk and ext4; pin %s has neither: give a distribution kernel with --kernel FILE --modules DIR", *b.kernel)
		}
	}
	return "", nil
}

// modules are the module files PID 1 loads from --modules: the guest's,
// and a root image's too when there is one.
func (b *bootArgs) modules() ([]string, error) {
	if *b.mods == "" {
		return nil, nil
	}
	names := harness.GuestModules
	if *b.rootImage != "" {
		names = append(slices.Clip(names), harness.RootImageModules...)
	}
	return harness.ResolveModules(*b.mods, names)
}

// bootExit reports a guest run and returns boot's exit status.
func bootExit(ctx context.Context, io *cli.Stdio, log *slog.Logger, res *harness.Result, err error) int {
	if res == nil {
		switch {
		case errors.Is(err, harness.ErrGuestSetup):
			return cli.Fail(io, "boot", cli.ExitGuestSetup, err)
		case errors.Is(err, harness.ErrNoQEMU), errors.Is(err, harness.ErrKVMUnusable):
			return cli.Fail(io, "boot", cli.ExitFail, err) // as --help says: QEMU could not be had, KVM asked for and unusable
		}
		return cli.Fail(io, "boot", cli.ExitIndeterminate, err)
	}
	if io.Verbose && err == nil {
		harness.WriteConsole(io.Err, "lockstep boot: ", res.ConsoleTail)
	}
	if io.Verbose {
		log.Info("guest finished", "status", res.Status, "accel", res.Accel, "boot", res.Timings.Boot.Round(time.Millisecond),
			"job", res.Timings.Job.Round(time.Millisecond), "total", res.Timings.Total.Round(time.Millisecond))
	}
	if err != nil {
		return bootFailed(ctx, io, res, err)
	}
	return res.Status
}

// bootFailed shows what there is to see of a guest that did not report
// trustworthily (harness.Result.WriteFailure) and returns boot's status.
func bootFailed(ctx context.Context, io *cli.Stdio, res *harness.Result, err error) int {
	res.WriteFailure(io.Err, "lockstep boot: ", io.Verbose, ctx.Err() == nil)
	code := cli.ExitIndeterminate
	if errors.Is(err, harness.ErrGuestSetup) {
		code = cli.ExitGuestSetup
	}
	return cli.Fail(io, "boot", code, err)
}
