package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/pruneguest"
	"github.com/lockstep-sandbox/lockstep/pruner/prune"
)

func init() {
	guestRole(pruneguest.GuestRole, "prune", pruneRole)
	verbs.Register(&cli.Verb{
		Name:   contain.Verb,
		Hidden: true,
		Usage:  contain.Verb + " <op> <arg>…",
		Short:  "the containment probe of lockstep prune (one operation, START and OP lines)",
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
			return func(ctx context.Context, io *cli.Stdio, args []string) int { return contain.ProbeMain(args, io.Out) }
		},
	})
	verbs.Register(&cli.Verb{
		Name:    "prune",
		Usage:   "prune --key <key>|all --exercises <dir> --out <dir> [--in-guest | --on-host] [--kernel <pin>|<file>] [--root <dir>] [--accel {auto|kvm|tcg}] [--cpu <model>] [--seeds <dir>] [--only <exercise>] [--check-minimality]",
		Short:   "prune a policy for every exercise of a key (the default prune)",
		Long:    help("prune", nil),
		Example: example("prune"),
		Flags:   pruneFlags,
	})
}

func pruneFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	key := fs.String("key", "", "language `key` whose exercises are pruned, or all: every key, each into <out>/<key>")
	root := fs.String("exercises", "", "testing root `dir`ectory (<dir>/<family>/<exercise>/)")
	out := fs.String("out", "", "output `dir`ectory for <key>_<exercise>.cfg/.json/.aborted.json")
	inGuest := fs.Bool("in-guest", false, "prune on the running kernel (the guest's side)")
	onHost := fs.Bool("on-host", false, "prune on this machine; needs LOCKSTEP_DISPOSABLE=1")
	kernelArg := cli.StrictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file of the guests", wantKernel)
	pinsFlag(fs)
	rootDir := fs.String("root", "", "guest root `dir`ectory (default: this host's /)")
	accel := fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	cpuFlag(fs)
	seeds := fs.String("seeds", "", "`dir`ectory of the seed files prune.json may name (default: the seeds shipped with lockstep)")
	only := fs.String("only", "", "prune only the `exercise` of this folder name")
	workDir := fs.String("work-dir", exercise.DefaultWorkDir, "working `dir`ectory of every run (with --in-guest or --on-host)")
	skipContain := fs.Bool("skip-containment", false, "leave out the containment checks (recorded; for development)")
	rootDigest := fs.String("root-digest", "", "with --in-guest or --on-host: provenance.root_digest of the records, the `digest` of the root the prune runs on (default: taken of / here)")
	minimal := fs.Bool("check-minimality", false, "after verifying, drop each grant in turn and record whether the exercise still passes (one run per grant)")
	quiet := fs.Bool("q", false, "quiet: no progress lines (a line per stage and run), only warnings and each exercise's result")
	listKeys := fs.Bool("list-keys", false, "print the keys --key all prunes (those of --exercises), one a line, and exit")
	return func(ctx context.Context, io *cli.Stdio, args []string) int {
		v := verbs["prune"]
		if *listKeys {
			return printKeys(io, v, *root, *key, args)
		}
		io, end := io.WithDisplay("prune")
		defer end()
		if err := checkPruneArgs(args, *key, *root, *out, *only, *accel, *inGuest, *onHost); err != nil {
			return cli.UsageExit(io, v, err)
		}
		var pruneKey func(key, out string) int
		if *inGuest || *onHost {
			if err := prune.Disposable(); err != nil {
				return cli.Fail(io, "prune", cli.ExitRefused, err)
			}
			digest, err := rootDigestFlag(*rootDigest)
			if err != nil {
				return rootDigestExit(io, v, err)
			}
			pruneKey = pruneKeyHere(ctx, io, pruneguest.GuestOptions{Exercises: *root, Only: *only, SeedDir: *seeds, WorkDir: *workDir,
				SkipContainment: *skipContain, CheckMinimality: *minimal, RootDigest: digest, Quiet: *quiet})
		} else {
			pruneKey = pruneKeyGuests(ctx, io, *kernelArg, pruneguest.HostOptions{Exercises: *root, Only: *only, Seeds: *seeds,
				SkipContainment: *skipContain, CheckMinimality: *minimal, Quiet: *quiet, Sizing: harness.Sizing{Root: *rootDir, Accel: *accel, MemMB: 1024}})
		}
		if *key == allKeys {
			return pruneAll(ctx, io, *root, *out, pruneKey)
		}
		return pruneKey(*key, *out)
	}
}

// checkPruneArgs is the usage error of prune's arguments, if any.
func checkPruneArgs(args []string, key, root, out, only, accel string, inGuest, onHost bool) error {
	switch {
	case len(args) > 0:
		return cli.Usagef("unexpected arguments %q", args)
	case key == allKeys && inGuest:
		return cli.Usagef("--key %s is the host's: the guest prunes one key", allKeys)
	case key == allKeys && only != "":
		return cli.Usagef("--only names an exercise of one key; --key %s prunes every key", allKeys)
	case key != allKeys && !exercise.ValidKey(key):
		return cli.Usagef("--key %q: want lower-case words joined by hyphens, e.g. java-gradle", key)
	case root == "" || out == "":
		return cli.Usagef("--exercises and --out are required")
	case inGuest && onHost:
		return cli.Usagef("--in-guest and --on-host exclude each other")
	}
	return checkAccel(accel)
}

// printKeys is --list-keys: the keys of the exercise tree, in the order
// --key all takes them (the matrix of the prune-kvm workflow's plan job).
func printKeys(io *cli.Stdio, v *cli.Verb, root, key string, args []string) int {
	switch {
	case len(args) > 0 || key != "":
		return cli.UsageExit(io, v, cli.Usagef("--list-keys takes only --exercises"))
	case root == "":
		return cli.UsageExit(io, v, cli.Usagef("--list-keys needs --exercises"))
	}
	keys, err := exercise.EveryKey(root, allKeys)
	if err != nil {
		return cli.Fail(io, "prune", cli.ExitFail, err)
	}
	for _, k := range keys {
		fmt.Fprintln(io.Out, k)
	}
	return cli.ExitOK
}

// pruneKeyHere prunes one key's exercises on this machine, opts the
// options of every key.
func pruneKeyHere(ctx context.Context, io *cli.Stdio, opts pruneguest.GuestOptions) func(key, out string) int {
	return func(key, out string) int {
		found, code := pruneExercises(io, opts.Exercises, key, opts.Only)
		if code != cli.ExitOK {
			return code
		}
		o := opts
		o.Key, o.Out, o.Found = key, out, found
		return pruneHere(ctx, io, o)
	}
}

// pruneKeyGuests prunes one key's exercises, each in a fresh guest, opts
// the options of every key.
func pruneKeyGuests(ctx context.Context, io *cli.Stdio, kernelArg string, opts pruneguest.HostOptions) func(key, out string) int {
	return func(key, out string) int {
		found, code := pruneExercises(io, opts.Exercises, key, opts.Only)
		if code != cli.ExitOK {
			return code
		}
		o := opts
		o.Key, o.Out, o.Found = key, out, found
		return pruneGuests(ctx, io, kernelArg, o)
	}
}

// pruneAll prunes every key of the exercise tree in turn, in key order,
// each into its own <out>/<key> (the path set `observe --key all` reads),
// so each key's policies, records and stale-file clean-up stay apart. One
// key's failure does not stop the others; the status is the worst (1 over
// 70 over 3 over 0). A refusal of the machine (125) is taken before any key.
func pruneAll(ctx context.Context, io *cli.Stdio, root, out string, pruneKey func(key, out string) int) int {
	keys, err := exercise.EveryKey(root, allKeys)
	if err != nil {
		return cli.Fail(io, "prune", cli.ExitFail, err)
	}
	return eachKey(ctx, io, "prune", keys, func(k string) string { return "out " + filepath.Join(out, k) },
		func(k string) int { return pruneKey(k, filepath.Join(out, k)) })
}

// pruneExercises are the key's exercises under root (only the one named
// only, if given), and cli.ExitOK; another exit status when there are none to
// prune or the testing root was refused, each of its problems printed.
func pruneExercises(io *cli.Stdio, root, key, only string) ([]exercise.Found, int) {
	found, err := exercise.ForKey(root, key)
	if err != nil {
		var de *exercise.DiscoveryError
		if errors.As(err, &de) {
			for _, l := range de.Lines() {
				fmt.Fprintf(io.Err, "lockstep prune: %s\n", l)
			}
			fmt.Fprintf(io.Err, "lockstep prune: the testing root %s was refused; nothing was pruned\n", root)
			return nil, cli.ExitFail
		}
		return nil, cli.Fail(io, "prune", cli.ExitFail, err)
	}
	if len(found) == 0 {
		return nil, cli.Fail(io, "prune", cli.ExitFail, fmt.Errorf("no exercise of key %q under %s", key, root))
	}
	if only != "" {
		if found, err = exercise.Named(found, only); err != nil {
			return nil, cli.Fail(io, "prune", cli.ExitUsage, cli.Usagef("--only %v", err))
		}
	}
	return found, cli.ExitOK
}

// pruneRole is the prune's guest side (pruneguest.GuestRole): the
// exercise the host named, pruned on the running kernel.
func pruneRole(ctx context.Context, io *cli.Stdio, opts pruneguest.GuestOptions) int {
	found, code := pruneExercises(io, opts.Exercises, opts.Key, opts.Only)
	if code != cli.ExitOK {
		return code
	}
	opts.Found = found
	return pruneHere(ctx, io, opts)
}

// pruneHere prunes each exercise on this machine (pruneguest.Guest) with
// lockstep's own enforcer.
func pruneHere(ctx context.Context, io *cli.Stdio, opts pruneguest.GuestOptions) int {
	enf, err := enforcer.SelfMeasureArgv()
	if err != nil {
		return cli.Fail(io, "prune", cli.ExitFail, err)
	}
	opts.Enforcer, opts.Log, opts.Done = enf, io.ProgressLog("prune", opts.Quiet), pruneDone(io)
	status, err := pruneguest.Guest(ctx, opts)
	if err != nil {
		return cli.Fail(io, "prune", cli.ExitFail, err)
	}
	return status
}

// pruneGuests prunes each exercise in a fresh guest (pruneguest.Host).
func pruneGuests(ctx context.Context, io *cli.Stdio, kernelArg string, opts pruneguest.HostOptions) int {
	opts.Log = io.ProgressLog("prune", opts.Quiet)
	g, err := guestkernel.Resolve(ctx, kernelArg, opts.Log)
	if err != nil {
		return cli.Fail(io, "prune", cli.ExitFail, err)
	}
	bz := g.BzImage
	opts.Boot = g.Boot
	opts.Kernel, opts.Stderr, opts.Verbose, opts.Done = bz, io.Err, io.Verbose, pruneDone(io)
	if io.Verbose {
		opts.Stdout = io.Err
	}
	status, err := pruneguest.Host(ctx, opts)
	if err != nil {
		return cli.Fail(io, "prune", cli.ExitFail, err)
	}
	return status
}

// pruneDone prints how an exercise's prune ended: its policy or abort here,
// or on the host the reason a guest's exercise has no result (the guest
// printed the rest).
func pruneDone(io *cli.Stdio) func(pruneguest.Outcome) {
	return func(o pruneguest.Outcome) {
		if l := o.Line(); l != "" {
			fmt.Fprintf(io.Err, "lockstep prune: %s\n", l)
		}
	}
}
