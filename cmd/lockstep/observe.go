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
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/report"
)

// observeLong is observe's --help text.
const observeLong = `Boots the kernel (a pin, built and cached on first use, or a bzImage file) in a
throwaway guest with the exercises and path sets shared read-only, and runs the
observer there. It registers as the audit daemon before any workload, proves the
kernel (Landlock ABI 10 or more, one refusal per right class → one record; else
status 3 and nothing is written), then for each exercise of the key:

  1. reads <key>_<ex>.cfg and its record <key>_<ex>.json; the record's
     cfg_sha256 must be the SHA-256 of the .cfg's raw bytes;
  2. runs the exercise 3 times unsandboxed (a flaky or test-less reference
     aborts);
  3. cross-check: one run under the policy with every second filesystem grant
     removed, under strace and with log-new-exec; every Landlock refusal strace
     attributes (filesystem and network) must match exactly one audit record,
     joined on (pid, syscall) through its SYSCALL record, then on object and
     rights; a lost record or a missing deallocation barrier fails it;
  4. ABI-10 phase: 3 joint runs with every layer and the policy's limits; a
     refused UDP bind that strace's rule and a net.bind_udp record both name
     becomes "[bind] allow <port> udp"; any other difference aborts; 3 rounds;
  5. containment (evidence/contain): the canaries, a write into a read-only
     path, a connect and a bind to ports no rule names, one probe per limit.

With more than one vCPU (--cpus), the reference runs and each round's joint
runs after the first run side by side, one per vCPU (no more than half the
guest's free memory holds), each in a mount and network namespace of its own
with its own copy at the working directory.

--key all observes every key of the exercise tree in turn, one guest each,
reading and writing <path-sets>/<key> (so each key's run.json, observe.json and
artefacts stay apart; the report is <file>-<key>.html); one key's failure does
not stop the others, and the status is the worst (1 over 70 over 3 over 0).

Every run of an exercise is bounded by its policy's [limits] timeout; a run
that runs out of time makes the exercise inconclusive, unless the cross-check
had already found a mismatch. Under TCG the exercise runs' timeout and cpu
limits are the policy's times --tcg-time-factor (an emulated CPU is several
times slower than the machine that measured them; 1 keeps them); under KVM
they are the policy's own. The containment checks always keep the policy's
own limits. The factor used is in each .abi10.json and run.json (time_factor).

Writes into --path-sets: <key>_<ex>.abi10.json (schema 1), <key>_<ex>.abi10.cfg
(only with rows), <key>_<ex>.abi10.observed.trace.gz (the cross-check run's
strace log; after a joint run that ran out of time, that of one observed run
of the same policy), observe.json, run.json and the guest run's artefacts
kvm-console.log (its console), audit-raw.log (every audit record as received)
and kernel.config; --html's report links them and lists the cross-check's
matched pairs (observe.json's cross_check_matched). See docs/observe.md.

Exit status: 0 every exercise verified; 1 an exercise failed (its .abi10.json
says why); 3 indeterminate (kernel proof failed, records lost, an exercise
inconclusive because a run ran out of time, the guest did not report, or an
exercise lacks its record) when no exercise failed; 70 the guest could not be
set up; 2 usage.`

func init() {
	guestRole(observer.GuestRole, "observe", observeHere)
	register(&verb{
		Name:  "observe",
		Usage: "observe --key <key> --exercises <dir> --path-sets <dir> [--kernel <pin>|<file>] [--root <dir>] [--accel {auto|kvm|tcg}] [--cpu <model>] [--cpus N] [--mem MiB] [--timeout D] [--tcg-time-factor N] [--html <file>]",
		Short: "the KVM run: cross-check strace against Landlock's audit records in a guest, write ABI-10 sidecars",
		Long:  observeLong,
		Example: `# The KVM run for the fixture key on the default pin (7.2.13)
$ lockstep observe --key fixture --exercises testdata/exercises --path-sets /tmp/path_sets`,
		Flags: observeFlags,
	})
}

func observeFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	key := fs.String("key", "", "the `key` whose exercises to observe, or all: every key, each in <path-sets>/<key> (required)")
	exercises := fs.String("exercises", "", "testing root `dir`ectory, <root>/<family>/<exercise> (required)")
	pathSets := fs.String("path-sets", "", "`dir`ectory with the default prune's <key>_<ex>.cfg and .json; receives the results (required)")
	kernelArg := strictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file", wantKernel)
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
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["observe"]
		if len(args) > 0 {
			return usageExit(io, v, usagef("unexpected arguments %q", args))
		}
		if *key == "" || *exercises == "" || *pathSets == "" {
			return usageExit(io, v, usagef("--key, --exercises and --path-sets are required"))
		}
		if *wantABI == 0 {
			pin, err := kernel.Lookup(kernel.DefaultPin)
			if err != nil {
				return fail(io, "observe", exitFail, err)
			}
			*wantABI = pin.ABI
		}
		if *inGuest {
			if *key == allKeys {
				return usageExit(io, v, usagef("--key %s is the host's: the guest observes one key", allKeys))
			}
			dir, err := inGuestOut(*out)
			if err != nil {
				return usageExit(io, v, err)
			}
			digest, err := rootDigestFlag(*rootDigest)
			if err != nil {
				return rootDigestExit(io, v, err)
			}
			return observeHere(ctx, io, observer.GuestOptions{Key: *key, Exercises: *exercises, PathSets: *pathSets, Out: dir,
				WantABI: *wantABI, WantRelease: *wantRelease, BacklogLimit: uint32(*backlog), RootDigest: digest})
		}
		if err := checkGuestFlags(*accel, *tcgFactor); err != nil {
			return usageExit(io, v, err)
		}
		opts := observer.HostOptions{Key: *key, Exercises: *exercises, PathSets: *pathSets, TCGTimeFactor: *tcgFactor,
			Sizing: harness.Sizing{Root: *root, Accel: *accel, CPUs: *cpus, MemMB: *mem, Timeout: *timeout}, Verbose: io.verbose}
		if *key == allKeys {
			return observeAll(ctx, io, *kernelArg, *html, opts)
		}
		return observeHost(ctx, io, *kernelArg, *html, opts)
	}
}

// observeHere is the in-guest observer (observer.GuestRole, or --in-guest).
func observeHere(ctx context.Context, io *stdio, opts observer.GuestOptions) int {
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	// The role's options carry the host's digest; a job without one
	// (run by hand) takes the digest of / here, as --in-guest does.
	digest, err := rootDigestFlag(opts.RootDigest)
	if err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	opts.RootDigest, opts.Progress, opts.Log = digest, io.err, guestLogger(io, "observe")
	opts.Accel = os.Getenv(proto.EnvAccel)
	sum, err := observer.Guest(ctx, opts)
	if err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	if sum.Reason != "" {
		fmt.Fprintf(io.err, "lockstep observe: %s\n", sum.Reason)
	}
	return sum.Status
}

// observeHost boots the kernel with the in-guest observer as the job.
func observeHost(ctx context.Context, io *stdio, kernelArg, html string, opts observer.HostOptions) int {
	log := guestLogger(io, "observe")
	g, err := resolveGuestKernel(ctx, kernelArg, log)
	if err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	bz := g.bz
	opts.Boot = g.boot
	if opts.WantABI, err = selftestPinABI(kernelArg); err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	if opts.WantRelease, err = selftestRelease(bz); err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	if _, err := kernel.Lookup(kernelArg); err == nil {
		opts.Pin = kernelArg
	}
	opts.Kernel, opts.Stderr, opts.Log = bz, io.err, log
	t0 := time.Now()
	res, err := observer.Host(ctx, opts)
	if err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	for _, e := range exSummaries(res) {
		state := "verified"
		switch {
		case e.Inconclusive:
			state = "INCONCLUSIVE: " + e.Reason
		case !e.Verified:
			state = "FAILED: " + e.Reason
		}
		fmt.Fprintf(io.out, "%s_%s: %s\n", opts.Key, e.Exercise, state)
	}
	if res.Reason != "" {
		fmt.Fprintf(io.err, "lockstep observe: %s\n", res.Reason)
	}
	fmt.Fprintf(io.out, "status %d in %.1f s (accel %s%s); results in %s\n", res.Status, time.Since(t0).Seconds(), res.Run.Accel,
		timeFactorNote(", ", summaryFactor(res)), filepath.Clean(opts.PathSets))
	render := func() ([]byte, error) {
		return report.Observe(res, opts.Key, opts.PathSets, report.Meta{Started: t0, Seconds: time.Since(t0).Seconds(), Dir: filepath.Dir(html)})
	}
	if err := writeReport(html, render); err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	if html != "" {
		fmt.Fprintf(io.out, "report: %s\n", html)
	}
	return res.Status
}

// summaryFactor is the time factor the guest reported (1 when none).
func summaryFactor(res *observer.HostResult) int {
	if res.Summary == nil {
		return 1
	}
	return max(res.Summary.TimeFactor, 1)
}

func exSummaries(res *observer.HostResult) []observer.ExerciseSummary {
	if res.Summary == nil {
		return nil
	}
	return res.Summary.Exercises
}
