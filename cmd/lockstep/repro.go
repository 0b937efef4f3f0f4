package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/repro"
)

func init() {
	guestRole(repro.GuestRole, "repro", reproHere)
	register(&verb{
		Name:  "repro",
		Usage: "repro --kernel {host|<pin>|<file>} --kernel {host|<pin>|<file>} --config <file>… [--base-dir <dir>] [--root <dir>] [--json] [--html <file>] -- <cmd>…",
		Short: "the same command under the same policy on two kernels, refusals side by side",
		Long: `Runs the command under the policy (every Base*.cfg of --base-dir, then each
--config, combined as lockstep run does) on two kernels: "host" is this
machine's running kernel, observed in-process; a pin (built and cached on first
use) or a bzImage file boots a throwaway guest (the two sides run at once).
Each side runs "strace -f … lockstep run -q --config … -- cmd" and, where the
kernel offers Landlock audit records (ABI 7 or more), collects them as the
audit daemon and joins them to strace's refusals call by call.

The refusals are lined up by (system call, layer, objects). Printed for each
difference: the call, the object, the rights each kernel refused (fs.read_file,
net.bind_udp, …), the audit record behind each, and the policy row that would
grant it. A rule one kernel cannot enforce (a UDP row below Landlock ABI 10:
the enforcer refuses with 125 and nothing runs) is a difference of its own,
not a refusal of the call. See docs/repro.md.

Exit status: 0 both kernels refused the same; 1 they differ; 3 either side
could not be observed (the guest did not report, audit records were lost, the
enforcer refused for another reason); 2 usage.

Progress goes to stderr: a line as each kernel's side starts and ends, and
each guest's boot stages ("lockstep repro [<elapsed>] …", one line that
rewrites itself where stderr is a terminal); -q leaves only warnings and the
result.`,
		Example: `# Is the UDP bind refused on 7.2.13 but not on this machine's kernel?
$ lockstep repro --kernel host --kernel 7.2.13 --config udp.cfg -- /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.1", 5000))'`,
		Flags: reproFlags,
	})
}

// reproArgs are repro's flags.
type reproArgs struct {
	kernels, configs                      multiFlag
	baseDir, root, accel, html, name, out *string
	cpus, mem                             *int
	timeout, bootTimeout, wait            *time.Duration
	asJSON, inGuest, quiet                *bool
}

// reproFlags declares repro's flags on fs and returns the verb.
func reproFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	a := &reproArgs{}
	fs.Var(strictList{&a.kernels, wantKernelOrHost}, "kernel", "`kernel`: host, a pin or a bzImage file (exactly twice)")
	pinsFlag(fs)
	fs.Var(&a.configs, "config", "policy `file` (repeatable)")
	a.baseDir = strictString(fs, "base-dir", "", "`dir`ectory whose Base*.cfg files come first", wantBaseDir)
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
func (a *reproArgs) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["repro"]
	if len(args) == 0 {
		return usageExit(io, v, usagef("no command: give it after --"))
	}
	if *a.baseDir == "" && len(a.configs) == 0 {
		return usageExit(io, v, usagef("no policy: give --config (or --base-dir)"))
	}
	p, err := policy.Load(*a.baseDir, a.configs)
	if err != nil {
		return fail(io, "repro", exitUsage, err)
	}
	if *a.inGuest {
		return a.inGuestRun(ctx, io, v, p, args)
	}
	if len(a.kernels) != 2 {
		return usageExit(io, v, usagef("--kernel given %d time(s): want exactly two kernels", len(a.kernels)))
	}
	switch *a.accel {
	case harness.AccelAuto, harness.AccelKVM, harness.AccelTCG:
	default:
		return usageExit(io, v, usagef("--accel %q: want auto, kvm or tcg", *a.accel))
	}
	io, end := withProgressDisplay(io, "repro")
	defer end()
	log := progressLogger(io, "repro", *a.quiet)
	opts := repro.HostOptions{Policy: p, Command: args, Wait: *a.wait, Verbose: io.verbose, Log: log,
		Sizing: harness.Sizing{Root: *a.root, Accel: *a.accel, CPUs: *a.cpus, MemMB: *a.mem, Timeout: *a.timeout, BootTimeout: *a.bootTimeout}}
	if io.verbose {
		opts.Stderr = io.err
	}
	if opts.Kernels, err = reproKernels(ctx, a.kernels, log); err != nil {
		return fail(io, "repro", exitIndeterminate, err)
	}
	t0 := time.Now()
	res, err := repro.Host(ctx, opts)
	if err != nil {
		return fail(io, "repro", exitIndeterminate, err)
	}
	if err := writeReport(*a.html, func() ([]byte, error) {
		return report.Repro(res, report.Meta{Title: "lockstep repro", Started: t0, Seconds: time.Since(t0).Seconds()})
	}); err != nil {
		return fail(io, "repro", exitIndeterminate, err)
	}
	if *a.asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(io.out, "%s\n", b)
	} else {
		printRepro(io, res)
	}
	return res.Status
}

// inGuestRun is --in-guest: the guest side run by hand, on any machine
// given --out.
func (a *reproArgs) inGuestRun(ctx context.Context, io *stdio, v *verb, p *policy.Policy, args []string) int {
	dir, err := inGuestOut(*a.out)
	if err != nil {
		return usageExit(io, v, err)
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
		g, err := resolveGuestKernel(ctx, k, log)
		if err != nil {
			return out, err
		}
		out[i].BzImage, out[i].Boot = g.bz, g.boot
		if _, err := kernel.Lookup(k); err == nil {
			out[i].Pin = k
		}
	}
	return out, nil
}

// reproHere is the in-guest side (repro.GuestRole, or --in-guest, which
// works on any machine with --out).
func reproHere(ctx context.Context, io *stdio, opts repro.GuestOptions) int {
	o, err := repro.Guest(ctx, opts)
	if err != nil {
		return fail(io, "repro", exitIndeterminate, err)
	}
	fmt.Fprintf(io.err, "repro: %s (ABI %d, audit %v): status %d, %d refusal(s)\n", opts.Kernel, o.ABI, o.Audit, o.Status, len(o.Refusals))
	return exitOK
}

func printRepro(io *stdio, res *repro.Result) {
	for _, o := range res.Kernels {
		audit := "audit records"
		if !o.Audit {
			audit = "no audit: " + o.AuditReason
		}
		fmt.Fprintf(io.out, "%-10s %s, Landlock ABI %d, %s; status %d, %d refusal(s)\n", o.Kernel, o.Release, o.ABI, audit, o.Status, len(o.Refusals))
	}
	for i, d := range res.Differences {
		fmt.Fprintf(io.out, "\ndifference %d (%s): %s\n", i+1, d.Kind, d.Summary)
		for side, r := range []*engine.Refusal{d.A, d.B} {
			k := res.Kernels[side].Kernel
			switch {
			case d.Kind == repro.KindUnenforceable:
				continue
			case r == nil:
				fmt.Fprintf(io.out, "  %-10s allowed\n", k)
				continue
			}
			fmt.Fprintf(io.out, "  %-10s refused %s %s (%s)\n", k, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","), r.Errno)
			fmt.Fprintf(io.out, "  %-10s strace: %s\n", "", r.Line)
			for _, a := range r.Audit {
				fmt.Fprintf(io.out, "  %-10s audit:  %s\n", "", a)
			}
			if len(r.Audit) == 0 && res.Kernels[side].Audit {
				fmt.Fprintf(io.out, "  %-10s audit:  (no record joined)\n", "")
			}
			fmt.Fprintf(io.out, "  %-10s grant:  %s\n", "", strings.Join(r.Grant, "; "))
		}
		for _, r := range d.Rules {
			fmt.Fprintf(io.out, "  %-10s cannot enforce %s: needs Landlock ABI %d (%s)\n", res.Kernels[d.Side].Kernel, r.Rule, r.NeedABI, r.Why)
		}
	}
	switch res.Status {
	case repro.StatusSame:
		fmt.Fprintf(io.out, "\nsame: %d refusal(s) on both kernels alike\n", len(res.Same))
	case repro.StatusDiffer:
		fmt.Fprintf(io.out, "\n%d difference(s), %d refusal(s) alike\n", len(res.Differences), len(res.Same))
	default:
		fmt.Fprintf(io.out, "\nindeterminate: %s\n", res.Reason)
	}
}
