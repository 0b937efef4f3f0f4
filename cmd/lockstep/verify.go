package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

func init() {
	guestRole(verify.GuestRole, "verify", verifyHere)
	register(&verb{
		Name:  "verify",
		Usage: "verify --base <file> [--config <file>…] --kernel {<pin>|<file>}… --exercises <dir> [--key <key>] [--exercise <name>…] [--joint-runs N] [--parallel N] [--json] [--html <file>]",
		Short: "a base policy on several kernels: every exercise of the key, a matrix of verdicts",
		Long: `Checks the base (plus each --config, combined as lockstep run does) against every
exercise of the key on every kernel (a pin, built and cached on first use, or a
bzImage file). Each (kernel, exercise) cell is a fresh throwaway guest; the
guests run in parallel through the harness pool (--parallel bounds them; 1
runs them one after another). In each guest:

  1. a rule the kernel cannot enforce (a UDP row below Landlock ABI 10) fails
     the cell, naming the rule;
  2. one reference run unsandboxed (no tests, or an infrastructure failure:
     indeterminate);
  3. --joint-runs runs under the policy (every layer, the limits): each must
     reach the reference's verdict;
  4. if one did not: a diagnosis run under strace (and Landlock's audit
     records where the kernel offers them, ABI 7+) names every refused call,
     its object, rights, record and the row that would grant it: fail;
  5. else containment: a canary file outside every grant stays unreadable, a
     TCP port no rule names stays unreachable: pass, or fail naming the check.

Prints the matrix kernel × exercise (pass, fail with the refused calls,
indeterminate with why). See docs/verify.md.

Exit status: 0 every cell passed; 1 any failed; 3 any indeterminate and none
failed; 2 usage.`,
		Example: `# The generic base on the default pin and Debian trixie's 6.12
$ lockstep verify --base BaseLanguage-generic.cfg --kernel 7.2.13 --kernel 6.12.117 --exercises verify/testdata/exercises --key generic --html verify.html`,
		Flags: verifyFlags,
	})
}

func verifyFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	var kernels, configs, only multiFlag
	base := fs.String("base", "", "base policy `file` (required)")
	fs.Var(&configs, "config", "further policy `file` (repeatable)")
	fs.Var(strictList{&kernels, wantKernel}, "kernel", "kernel `pin` or bzImage file (repeatable, at least one)")
	exercises := fs.String("exercises", "", "testing root `dir`ectory, <root>/<family>/<exercise> (required)")
	key := fs.String("key", "", "the `key` whose exercises to verify (default: the only key under --exercises)")
	fs.Var(&only, "exercise", "verify only the exercise `name`d (repeatable)")
	joint := fs.Int("joint-runs", verify.DefaultJointRuns, "runs under the policy per exercise")
	parallel := fs.Int("parallel", 0, "guests at once (0: as many as the host's CPUs allow; 1: one after another)")
	root := fs.String("root", "", "host `dir`ectory exported read-only as the guests' root (default /)")
	accel := fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	cpus := fs.Int("cpus", 1, "vCPUs per guest")
	mem := fs.Int("mem", 512, "guest memory in `MiB`")
	timeout := fs.Duration("timeout", 0, "bound on each guest's job (default: harness's, scaled to the accelerator)")
	bootTimeout := fs.Duration("boot-timeout", 0, "bound on each guest's boot (default: harness's, 60s under TCG)")
	asJSON := fs.Bool("json", false, "print the result as one JSON document (schema 1)")
	html := fs.String("html", "", "write a self-contained HTML report to `file`")
	inGuest := fs.Bool("in-guest", false, "internal: verify one exercise on the running kernel, the cell to --out")
	name := fs.String("name", "", "with --in-guest: the kernel's `name` in the cell")
	out := fs.String("out", "", "with --in-guest: `dir`ectory for the cell")
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["verify"]
		if len(args) > 0 {
			return usageExit(io, v, usagef("unexpected arguments %q", args))
		}
		if *inGuest {
			return verifyInGuest(ctx, io, *name, *out, configs, *exercises, *key, only, *joint)
		}
		if *base == "" || *exercises == "" || len(kernels) == 0 {
			return usageExit(io, v, usagef("--base, --exercises and at least one --kernel are required"))
		}
		switch *accel {
		case harness.AccelAuto, harness.AccelKVM, harness.AccelTCG:
		default:
			return usageExit(io, v, usagef("--accel %q: want auto, kvm or tcg", *accel))
		}
		files := append([]string{*base}, configs...)
		p, err := policy.Load("", files)
		if err != nil {
			return fail(io, "verify", exitUsage, err)
		}
		if *key == "" {
			if *key, err = onlyKey(*exercises); err != nil {
				return usageExit(io, v, err)
			}
		}
		if len(only) > 0 {
			// Named exercises are checked before any kernel is fetched.
			found, err := exercise.ForKey(*exercises, *key)
			if err == nil && len(found) == 0 {
				err = fmt.Errorf("no exercise of key %q under %s", *key, *exercises)
			}
			if err == nil {
				_, err = exercise.Named(found, only...)
			}
			if err != nil {
				return usageExit(io, v, usagef("--exercise %v", err))
			}
		}
		log := guestLogger(io, "verify")
		opts := verify.HostOptions{Policy: p, Policies: files, Exercises: *exercises, Key: *key, Only: only, JointRuns: *joint,
			Parallel: *parallel, Verbose: io.verbose, Log: log,
			Sizing: harness.Sizing{Root: *root, Accel: *accel, CPUs: *cpus, MemMB: *mem, Timeout: *timeout, BootTimeout: *bootTimeout}}
		if io.verbose {
			opts.Stderr = io.err
		}
		if io.errTTY || io.verbose {
			opts.Progress = func(format string, a ...any) { fmt.Fprintf(io.err, "lockstep verify: "+format+"\n", a...) }
		}
		for _, k := range kernels {
			bz, err := resolveKernel(ctx, k, log)
			if err != nil {
				return fail(io, "verify", exitIndeterminate, err)
			}
			kk := verify.Kernel{Name: k, BzImage: bz}
			if pin, err := kernel.Lookup(k); err == nil {
				kk.Pin, kk.ABI = k, pin.ABI
			}
			opts.Kernels = append(opts.Kernels, kk)
		}
		t0 := time.Now()
		res, err := verify.Host(ctx, opts)
		if err != nil {
			return fail(io, "verify", exitIndeterminate, err)
		}
		if err := writeReport(*html, func() ([]byte, error) {
			return report.Verify(res, report.Meta{Title: "lockstep verify: " + res.Key, Started: t0, Seconds: res.WallSeconds})
		}); err != nil {
			return fail(io, "verify", exitIndeterminate, err)
		}
		if *asJSON {
			b, _ := json.MarshalIndent(res, "", "  ")
			fmt.Fprintf(io.out, "%s\n", b)
		} else {
			printVerify(io, res)
		}
		return res.Status
	}
}

// onlyKey is the key of every exercise under root, if there is one.
func onlyKey(root string) (string, error) {
	found, err := exercise.Discover(root)
	if err != nil {
		return "", err
	}
	keys := map[string]bool{}
	for _, f := range found {
		keys[f.Key] = true
	}
	if len(keys) != 1 {
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		return "", usagef("--key: %s holds %d keys (%s); name one", root, len(keys), strings.Join(ks, ", "))
	}
	for k := range keys {
		return k, nil
	}
	return "", nil
}

// verifyInGuest checks --in-guest's flags and runs verifyHere.
func verifyInGuest(ctx context.Context, io *stdio, name, out string, configs []string, exercises, key string, only []string, joint int) int {
	v := verbs["verify"]
	if len(configs) == 0 || exercises == "" || key == "" || len(only) != 1 {
		return usageExit(io, v, usagef("--in-guest needs --config, --exercises, --key and one --exercise"))
	}
	if out == "" {
		if os.Getenv("LOCKSTEP_GUEST") != "1" {
			return usageExit(io, v, usagef("--in-guest outside a guest needs --out"))
		}
		out = proto.ResultsDir
	}
	return verifyHere(ctx, io, verify.GuestOptions{Kernel: name, Configs: configs, Exercises: exercises, Key: key, Exercise: only[0],
		JointRuns: joint, Out: out})
}

// verifyHere is the in-guest side (verify.GuestRole, or --in-guest): one
// exercise on the running kernel.
func verifyHere(ctx context.Context, io *stdio, opts verify.GuestOptions) int {
	opts.Progress = func(format string, a ...any) { fmt.Fprintf(io.err, "verify: "+format+"\n", a...) }
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
		fmt.Fprintf(io.out, "\n%s × %s: %s: %s\n", c.Kernel, c.Exercise, c.Verdict, c.Why)
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
