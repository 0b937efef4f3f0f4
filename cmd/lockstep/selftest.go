package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/observer/proof"
	"github.com/lockstep-sandbox/lockstep/selftest"
)

func init() {
	envRoles[proof.Role] = proof.RefusalMain
	guestRole(selftest.GuestRole, "selftest", selftestRole)
	register(&verb{
		Name:  "selftest",
		Usage: "selftest [--kernel <pin>|<file>] [--modules <dir>] [--machine {microvm|q35}] [--accel {auto|kvm|tcg}] [--cpu <model>] [--boot-timeout <d>] [--results <dir>] [--json]",
		Short: "boot a guest and prove its kernel: release, LSM list, ABI, audit, one refusal per right → one record",
		Long: `Boots the kernel (a pin, built and cached on first use, or a bzImage file) in a
throwaway guest and proves inside it that the kernel is the one meant and that
its Landlock audit records can be trusted:

  release   uname -r equals the version in the bzImage header (the pin's)
  lsm       landlock is in /sys/kernel/security/lsm
  abi       the Landlock ABI is at least the pin's (10 for 7.2.13; for a
            kernel file, the default pin's)
  audit     audit enabled, this process registered as the audit daemon
            (unicast), backlog limit 8192, rate limit 0

then makes one deliberate refusal per right class (read_file, read_dir,
write_file, truncate, execute, make_reg, make_dir, remove_file, make_sym,
refer, ioctl_dev, bind_tcp, connect_tcp, bind_udp, connect_send_udp,
scope.signal), each in its own child and domain, and holds it only if exactly
one LANDLOCK_ACCESS record arrived naming that right alone, the expected object
(path and inode, port, or target pid) and, through the SYSCALL record of the
same serial, the child's pid and the refused system call. A right the kernel's
ABI lacks is "not offered". The records are also kept: --results gets
selftest.json and selftest-records.txt (every record, netlink form).

With --in-guest the checks run on the running kernel instead (what the guest
runs; also usable on a disposable machine as root); --capture then also keeps
every record form (netlink, /dev/kmsg, dmesg) of every refusal and of extra
scenarios (hex and deleted paths, a rename, lport, autobind) as test data.

Exit status: 0 every check held; 1 a check failed; 3 indeterminate: the LSM
list, the ABI (below the pin's, never 0) or audit failed, records were lost, a
deallocation barrier did not arrive, or the guest did not report; 70 the guest
could not be set up; 2 usage.

Progress goes to stderr: a line per stage of the guest's boot ("lockstep
selftest [<elapsed>] …", one line that rewrites itself where stderr is a
terminal); -q leaves only warnings and the report.`,
		Example: `# Prove the default pin (7.2.13) in a guest
$ lockstep selftest
# Debian 12's kernel (ABI 2, no Landlock audit): the ABI and audit checks fail, status 3
$ lockstep selftest --kernel /boot/vmlinuz-6.1.0-50-amd64 --modules /lib/modules/6.1.0-50-amd64 --machine q35`,
		Flags: selftestFlags,
	})
}

func selftestFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	kernelArg := strictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file", wantKernel)
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
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["selftest"]
		if len(args) > 0 {
			return usageExit(io, v, usagef("unexpected arguments %q", args))
		}
		if *wantABI == 0 {
			pin, err := kernel.Lookup(kernel.DefaultPin)
			if err != nil {
				return fail(io, "selftest", exitIndeterminate, err)
			}
			*wantABI = pin.ABI
		}
		if *inGuest && *scenarios != "" {
			if err := proof.RunScenarios(ctx, proof.CaptureOptions{Out: *scenarios}); err != nil {
				return fail(io, "selftest", exitIndeterminate, err)
			}
			return exitOK
		}
		if *inGuest {
			out := *results
			if out == "" && os.Getenv(proto.EnvGuest) == "1" {
				out = proto.ResultsDir
			}
			code := selftestHere(ctx, io, selftest.GuestOptions{WantRelease: *wantRelease, WantABI: *wantABI, Out: out}, *asJSON)
			if *capture != "" {
				if err := proof.Capture(ctx, proof.CaptureOptions{Out: *capture}); err != nil {
					return fail(io, "selftest", exitIndeterminate, err)
				}
			}
			return code
		}
		if err := checkAccel(*accel); err != nil {
			return usageExit(io, v, err)
		}
		if *bootTimeout < 0 {
			return usageExit(io, v, usagef("--boot-timeout %v: want a duration of 0 or more", *bootTimeout))
		}
		return selftestGuest(ctx, io, selftestBoot{kernel: *kernelArg, modules: *modules, machine: *machine, accel: *accel, results: *results,
			bootTimeout: *bootTimeout, quiet: *quiet}, *asJSON)
	}
}

// selftestHere runs the proof on the running kernel (selftest.Guest) and
// prints the report.
func selftestHere(ctx context.Context, io *stdio, opts selftest.GuestOptions, asJSON bool) int {
	opts.Log = selftestLogger(io)
	rep, err := selftest.Guest(ctx, opts)
	if err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	if err := selftestPrint(io.out, rep, asJSON); err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	return rep.Status
}

// selftestRole is the selftest's guest side (selftest.GuestRole): the
// report as JSON on stdout, as the host's job always asked.
func selftestRole(ctx context.Context, io *stdio, opts selftest.GuestOptions) int {
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
func selftestGuest(ctx context.Context, io *stdio, b selftestBoot, asJSON bool) int {
	io, end := withProgressDisplay(io, "selftest")
	defer end()
	log := progressLogger(io, "selftest", b.quiet)
	g, err := resolveGuestKernel(ctx, b.kernel, log)
	if err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	bz := g.bz
	opts := selftest.HostOptions{Kernel: bz, Machine: b.machine, Results: b.results, Sizing: harness.Sizing{Accel: b.accel, BootTimeout: b.bootTimeout},
		Stderr: io.err, Verbose: io.verbose, Log: log}
	if opts.Modules, err = guestModules(b.modules); err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	if g.boot.Modules != nil {
		if opts.Modules != nil {
			return fail(io, "selftest", exitUsage, fmt.Errorf("--modules: pin %s is Debian's image and brings its own", b.kernel))
		}
		opts.Modules, opts.Machine = g.boot.Modules, g.boot.Machine
	}
	if opts.WantABI, err = selftestPinABI(b.kernel); err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	if opts.WantRelease, err = selftestRelease(bz); err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	if io.verbose {
		opts.Stdout = io.err // the report is read from the results, not the console
	}
	log.Info(fmt.Sprintf("kernel %s (%s): booting a guest to prove it", opts.WantRelease, filepath.Base(bz)))
	res, err := selftest.Host(ctx, opts)
	if err != nil {
		code := exitIndeterminate
		if res != nil && errors.Is(err, harness.ErrGuestSetup) {
			code = exitGuestSetup
		}
		return fail(io, "selftest", code, err)
	}
	if !asJSON {
		fmt.Fprintf(io.out, "kernel %s (%s), accel %s\n", opts.WantRelease, filepath.Base(bz), res.Run.Accel)
	}
	if err := selftestPrint(io.out, res.Report, asJSON); err != nil {
		return fail(io, "selftest", exitIndeterminate, err)
	}
	return res.Report.Status
}

// guestModules are the modules a distribution kernel's guest loads from
// dir, none when dir is "".
func guestModules(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	return harness.ResolveModules(dir, harness.GuestModules)
}

// selftestLogger is verbLogger for selftest.
func selftestLogger(io *stdio) *slog.Logger { return verbLogger(io, "selftest", slog.LevelWarn) }

func selftestPrint(w io.Writer, rep *proof.Report, asJSON bool) error {
	if !asJSON {
		return rep.WriteTable(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// selftestPinABI is the pin's Landlock ABI; a kernel file is held to the default
// pin's.
func selftestPinABI(kernelArg string) (int, error) {
	pin := kernelArg
	if strings.ContainsRune(kernelArg, '/') {
		pin = kernel.DefaultPin
	} else if fi, err := os.Stat(kernelArg); err == nil && fi.Mode().IsRegular() {
		pin = kernel.DefaultPin
	}
	p, err := kernel.Lookup(pin)
	if err != nil {
		return 0, err
	}
	return p.ABI, nil
}

// selftestRelease is the release (first word of the version string) that a
// bzImage's setup header names: what uname -r must say in the guest.
func selftestRelease(bz string) (string, error) {
	f, err := safefile.Open(bz)
	if err != nil {
		return "", fmt.Errorf("kernel release: %w", err)
	}
	defer f.Close()
	v, err := kernel.HeaderVersion(f)
	if err != nil {
		return "", fmt.Errorf("kernel release of %s: %w", bz, err)
	}
	release, _, _ := strings.Cut(v, " ")
	return release, nil
}
