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
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

func init() {
	register(&verb{
		Name:  "boot",
		Usage: "boot [--kernel <pin>|<file>] [--root <dir> | --root-image <file>] [--share <src>[:<guestpath>]]… [--accel {auto|kvm|tcg}] [--cpu <model>] [--mem <MiB>] [--cpus <n>] [--timeout <duration>] [--boot-timeout <duration>] [--results <dir>] -- <cmd>…",
		Short: "run one command in a throwaway guest; its output and status come back",
		Long: `Boots the pinned kernel (built and cached on first use; --kernel also takes a
bzImage file) in QEMU with this lockstep binary as PID 1. The guest's root is
--root (default: this host's /) shared read-only over 9p, or --root-image (an
ext4 disk image attached read-only; the kernel needs virtio-blk and ext4, so a
distribution kernel with --modules), with a tmpfs overlay on top: the command
sees the host's files (or the image's), and nothing it writes reaches them;
/run, /tmp and /var/tmp are empty tmpfs of the guest's own. --share adds read-only directories (at /run/lockstep/share/<n>, or the given
guest path). The command runs as root with LOCKSTEP_GUEST=1 and LOCKSTEP_ACCEL
(kvm or tcg: the accelerator), in the current directory when it exists in the
guest. Its stdout and stderr stream back live; what it writes under
/run/lockstep/results is copied to --results with run.json.

--accel auto uses KVM only if a probe boot under KVM works (cached per host
kernel and QEMU version) and otherwise says once that it falls back to TCG;
--accel kvm fails at once when KVM cannot run guests. Under KVM the guest's
CPU model is --cpu, else $LOCKSTEP_CPU, else the first the probe booted of
` + strings.Join(harness.KVMCPUModels, ", ") + `; under TCG it is max. run.json names it (cpu).
Deadlines: boot ` + fmt.Sprint(harness.BootDeadlines[harness.AccelKVM]) + ` under KVM and ` + fmt.Sprint(harness.BootDeadlines[harness.AccelTCG]) + ` under TCG (the KVM
probe's too), shutdown ` + fmt.Sprint(harness.ShutdownDeadlines[harness.AccelKVM]) + ` and ` + fmt.Sprint(harness.ShutdownDeadlines[harness.AccelTCG]) + `, job --timeout (default
10 min, ×10 under TCG); a value given is used as is. When one passes, forensics.txt (vCPU
registers, run state, console tail) is saved in --results (or the cache) and
the guest is killed.

Exit status: the command's own; 3 indeterminate (the guest did not report in
full: no status line, a gap in the events, a bad checksum, a deadline passed,
interrupted); 70 the guest could not be set up (the reason is printed); 1 the
kernel or QEMU could not be had, or KVM was asked for and is unusable; 2 usage.`,
		Example: `# The guest's view of the host's root, and its status
$ lockstep boot -- sh -c 'cat /etc/os-release; exit 7'
# Keep what the command writes under /run/lockstep/results
$ lockstep boot --results out -- sh -c 'uname -a > /run/lockstep/results/uname.txt'
# Another kernel file, TCG, two vCPUs
$ lockstep boot --kernel ./bzImage --accel tcg --cpus 2 -- nproc
# Debian's distribution kernel (virtio, 9p and overlayfs are modules there)
$ lockstep boot --kernel /boot/vmlinuz-6.1.0-50-amd64 --modules /lib/modules/6.1.0-50-amd64 --machine q35 -- uname -r
# Phobos's layout: that kernel on q35 with an ext4 root image made by mkfs.ext4 -d
$ mkfs.ext4 -q -F -d rootfs root.img 2G
$ lockstep boot --kernel /boot/vmlinuz-6.1.0-50-amd64 --modules /lib/modules/6.1.0-50-amd64 --machine q35 --root-image root.img -- true`,
		Flags: bootFlags,
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
func bootFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	b := &bootArgs{fs: fs}
	b.kernel = strictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` (a version from kernel/pins.txt) or a bzImage file", wantKernel)
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
func (b *bootArgs) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["boot"]
	if err := b.check(args); err != nil {
		return usageExit(io, v, err)
	}
	log := bootLogger(io)
	var extra []string
	if *b.rootImage != "" {
		extra = harness.RootImageModules
	}
	g, err := resolveGuestKernel(ctx, *b.kernel, log, extra...)
	if err != nil {
		return fail(io, "boot", exitFail, err) // as --help says: the kernel could not be had
	}
	bz := g.bz
	rootDir, err := b.rootDir()
	if err != nil {
		return usageExit(io, v, err)
	}
	mods, err := b.modules()
	if err != nil {
		return fail(io, "boot", exitGuestSetup, err)
	}
	machine := *b.machine
	if g.boot.Modules != nil {
		if mods != nil {
			return usageExit(io, v, usagef("--modules: pin %s is Debian's image and brings its own", *b.kernel))
		}
		mods, machine = g.boot.Modules, g.boot.Machine
	}
	dir := ""
	if rootDir == "/" {
		dir, _ = os.Getwd()
	}
	res, err := harness.Run(ctx, harness.Options{
		Kernel: bz, Root: rootDir, RootImage: *b.rootImage, Shares: b.shares, Accel: *b.accel, CPU: *b.cpu, Machine: machine,
		MemMB: *b.mem, CPUs: *b.cpus, Timeout: *b.timeout, BootTimeout: *b.bootTimeout, Command: args, Dir: dir, Modules: mods,
		Stdout: io.out, Stderr: io.err, ResultsDir: *b.results, Verbose: io.verbose, Log: log,
	})
	return bootExit(ctx, io, log, res, err)
}

// check refuses a missing command and out-of-range values.
func (b *bootArgs) check(args []string) error {
	if len(args) == 0 {
		return usagef("no command given after --")
	}
	switch *b.accel {
	case harness.AccelAuto, harness.AccelKVM, harness.AccelTCG:
	default:
		return usagef("--accel %q: want auto, kvm or tcg", *b.accel)
	}
	switch {
	case *b.mem < 64:
		return usagef("--mem %d: want at least 64 (MiB)", *b.mem)
	case *b.cpus < 1:
		return usagef("--cpus %d: want at least 1", *b.cpus)
	case *b.timeout < 0:
		return usagef("--timeout %v: want a duration of 0 or more", *b.timeout)
	case *b.bootTimeout < 0:
		return usagef("--boot-timeout %v: want a duration of 0 or more", *b.bootTimeout)
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
		return "", usagef("--root and --root-image exclude each other")
	}
	if *b.mods == "" {
		if p, err := kernel.Lookup(*b.kernel); err == nil && p.Source != kernel.SourceDebianImage {
			return "", usagef("--root-image needs a kernel with virtio-blk and ext4; pin %s has neither: give a distribution kernel with --kernel FILE --modules DIR", *b.kernel)
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
func bootExit(ctx context.Context, io *stdio, log *slog.Logger, res *harness.Result, err error) int {
	if res == nil {
		switch {
		case errors.Is(err, harness.ErrGuestSetup):
			return fail(io, "boot", exitGuestSetup, err)
		case errors.Is(err, harness.ErrNoQEMU), errors.Is(err, harness.ErrKVMUnusable):
			return fail(io, "boot", exitFail, err) // as --help says: QEMU could not be had, KVM asked for and unusable
		}
		return fail(io, "boot", exitIndeterminate, err)
	}
	if io.verbose && err == nil {
		printConsole(io, res.ConsoleTail)
	}
	if io.verbose {
		log.Info("guest finished", "status", res.Status, "accel", res.Accel, "boot", res.Timings.Boot.Round(time.Millisecond),
			"job", res.Timings.Job.Round(time.Millisecond), "total", res.Timings.Total.Round(time.Millisecond))
	}
	if err != nil {
		return bootFailed(ctx, io, res, err)
	}
	return res.Status
}

// bootFailed shows what there is to see of a guest that did not report
// trustworthily: the console's tail (20 lines unless -v), the forensics and
// the QEMU command line to replay it.
func bootFailed(ctx context.Context, io *stdio, res *harness.Result, err error) int {
	tail := res.ConsoleTail
	if !io.verbose && len(tail) > 20 {
		tail = tail[len(tail)-20:]
	}
	if len(tail) > 0 {
		printConsole(io, tail)
	}
	if res.ForensicsFile != "" {
		fmt.Fprintf(io.err, "lockstep boot: forensics saved in %s\n", res.ForensicsFile)
	}
	if ctx.Err() == nil {
		fmt.Fprintf(io.err, "lockstep boot: to replay the boot: %s\n", res.QEMUCommand)
	}
	code := exitIndeterminate
	if errors.Is(err, harness.ErrGuestSetup) {
		code = exitGuestSetup
	}
	return fail(io, "boot", code, err)
}

// printConsole prints lines of the guest's console on stderr.
func printConsole(io *stdio, lines []string) {
	fmt.Fprintf(io.err, "lockstep boot: guest console, last %d lines:\n", len(lines))
	for _, l := range lines {
		fmt.Fprintf(io.err, "  | %s\n", l)
	}
}

// resolveKernel is resolveGuestKernel for the verbs that boot only kernels
// with everything built in (probe --boot, record).
func resolveKernel(ctx context.Context, arg string, log *slog.Logger) (string, error) {
	g, err := resolveGuestKernel(ctx, arg, log)
	if err == nil && g.boot.Modules != nil {
		err = fmt.Errorf("kernel %s is Debian's image, with modules; this verb boots pins built here or bzImage files", arg)
	}
	return g.bz, err
}

// guestKernel is a --kernel resolved: the bzImage to boot and, for a
// debian-image pin, its modules and machine.
type guestKernel struct {
	bz   string
	boot harness.Boot
}

// resolveGuestKernel takes a bzImage file as is and builds, unpacks or
// restores a pin. A debian-image pin boots on q35 with the modules a guest
// needs (harness.GuestModules, plus extra) from its own package, each
// checked against the SHA-256 recorded when the package was unpacked.
func resolveGuestKernel(ctx context.Context, arg string, log *slog.Logger, extra ...string) (guestKernel, error) {
	if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		return guestKernel{bz: arg}, nil
	}
	if strings.ContainsRune(arg, '/') {
		return guestKernel{}, fmt.Errorf("kernel file %s: not found", arg)
	}
	r, err := (&kernel.Builder{Log: log}).Build(ctx, arg)
	if err != nil {
		return guestKernel{}, fmt.Errorf("kernel %s: %w", arg, err)
	}
	g := guestKernel{bz: r.BzImage}
	if r.Image == nil {
		return g, nil
	}
	mods, err := harness.ResolveModules(r.Image.Modules, append(slices.Clip(harness.GuestModules), extra...))
	if err == nil {
		err = r.Image.CheckModules(mods)
	}
	if err != nil {
		return guestKernel{}, fmt.Errorf("kernel %s: %w", arg, err)
	}
	g.boot = harness.Boot{Modules: mods, Machine: harness.MachineQ35}
	return g, nil
}

// bootLogger is verbLogger for boot (and the verbs that boot through it).
func bootLogger(io *stdio) *slog.Logger { return guestLogger(io, "boot") }

// guestLogger is the logger of a verb that boots guests: warnings always,
// progress on a terminal, everything with -v; lines name the verb.
func guestLogger(io *stdio, verb string) *slog.Logger { return verbLogger(io, verb, slog.LevelWarn) }

// verbLogger writes "lockstep <verb>: <msg> k=v …" lines to stderr: records
// at quiet and above always, progress (info) when stderr is a terminal, and
// everything with -v.
func verbLogger(io *stdio, verb string, quiet slog.Level) *slog.Logger {
	return cli.Logger(io.err, "lockstep "+verb+": ", cli.Level(quiet, io.errTTY, io.verbose))
}
