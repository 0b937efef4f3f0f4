package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/pruneguest"
	"github.com/lockstep-sandbox/lockstep/pruner/prune"
)

func init() {
	guestRole(pruneguest.GuestRole, "prune", pruneRole)
	register(&verb{
		Name:   contain.Verb,
		Hidden: true,
		Usage:  contain.Verb + " <op> <arg>…",
		Short:  "the containment probe of lockstep prune (one operation, START and OP lines)",
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
			return func(ctx context.Context, io *stdio, args []string) int { return contain.ProbeMain(args, io.out) }
		},
	})
	register(&verb{
		Name:  "prune",
		Usage: "prune --key <key>|all --exercises <dir> --out <dir> [--in-guest | --on-host] [--kernel <pin>|<file>] [--root <dir>] [--accel {auto|kvm|tcg}] [--cpu <model>] [--seeds <dir>] [--only <exercise>] [--check-minimality]",
		Short: "prune a policy for every exercise of a key (the default prune)",
		Long: `Runs lockstep's layer pruner for every exercise of --key under --exercises
(<dir>/<family>/<exercise>/, key from prune.json or the family's name): a
baseline of three unsandboxed runs, then a policy grown from nothing by what
each refused call proves, minimised (a grant goes after two runs pass without
it), limits measured with margins, three joint verification runs, and
containment checks. Each exercise writes <key>_<exercise>.cfg with its header
and the schema-2 record <key>_<exercise>.json into --out, or, when it aborts,
<key>_<exercise>.aborted.json and no .cfg. Stale files of the key in --out
are removed first.

--key all prunes every key of the exercise tree in turn, each into
<out>/<key> (the path sets observe --key all reads); one key's failure does
not stop the others, and the status is the worst (1 over 70 over 3 over 0).
--list-keys --exercises <dir> prints those keys, one a line, and exits (the
prune-kvm workflow's plan job lists its matrix so).

By default each exercise is pruned in a fresh throwaway guest (--kernel, the
pinned kernel by default; --root, the host's / by default, read-only with a
tmpfs overlay), so nothing the prune deletes is the host's. --in-guest is
that guest's side. --on-host prunes on this machine instead, and only when
LOCKSTEP_DISPOSABLE=1 declares it disposable: the prune deletes and
recreates /var/tmp/testing-dir and plants canary files.

Wherever it prunes, every run starts cold: in a mount namespace of its own
whose system paths are overlays thrown away after the run, so nothing a run
leaves outside its working directory (a cache in /root, /tmp, /var/tmp or a
system path) is there for the next. This needs CAP_SYS_ADMIN; in a
container, run it with --cap-add SYS_ADMIN --security-opt
apparmor=unconfined (the runs themselves have CAP_SYS_ADMIN dropped).

Exit status: 0 every exercise has a policy; 1 an exercise aborted (or the
testing root was refused); 3 a guest did not report; 70 a guest could not be
set up; 125 refused to prune on a machine not declared disposable; 2 usage.
See docs/prune.md.`,
		Example: `# prune the generic exercises, each in a fresh guest on the pinned kernel
$ lockstep prune --key generic --exercises testdata/exercises --out build/path_sets
# on a disposable machine (a CI container), without a guest
$ LOCKSTEP_DISPOSABLE=1 lockstep prune --on-host --key generic --exercises testdata/exercises --out /tmp/out`,
		Flags: pruneFlags,
	})
}

func pruneFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	key := fs.String("key", "", "language `key` whose exercises are pruned, or all: every key, each into <out>/<key>")
	root := fs.String("exercises", "", "testing root `dir`ectory (<dir>/<family>/<exercise>/)")
	out := fs.String("out", "", "output `dir`ectory for <key>_<exercise>.cfg/.json/.aborted.json")
	inGuest := fs.Bool("in-guest", false, "prune on the running kernel (the guest's side)")
	onHost := fs.Bool("on-host", false, "prune on this machine; needs LOCKSTEP_DISPOSABLE=1")
	kernelArg := strictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file of the guests", wantKernel)
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
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["prune"]
		if *listKeys {
			return printKeys(io, v, *root, *key, args)
		}
		io, end := withProgressDisplay(io, "prune")
		defer end()
		if err := checkPruneArgs(args, *key, *root, *out, *only, *accel, *inGuest, *onHost); err != nil {
			return usageExit(io, v, err)
		}
		var pruneKey func(key, out string) int
		if *inGuest || *onHost {
			if err := prune.Disposable(); err != nil {
				return fail(io, "prune", exitRefused, err)
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
		return usagef("unexpected arguments %q", args)
	case key == allKeys && inGuest:
		return usagef("--key %s is the host's: the guest prunes one key", allKeys)
	case key == allKeys && only != "":
		return usagef("--only names an exercise of one key; --key %s prunes every key", allKeys)
	case key != allKeys && !exercise.ValidKey(key):
		return usagef("--key %q: want lower-case words joined by hyphens, e.g. java-gradle", key)
	case root == "" || out == "":
		return usagef("--exercises and --out are required")
	case inGuest && onHost:
		return usagef("--in-guest and --on-host exclude each other")
	}
	return checkAccel(accel)
}

// printKeys is --list-keys: the keys of the exercise tree, in the order
// --key all takes them (the matrix of the prune-kvm workflow's plan job).
func printKeys(io *stdio, v *verb, root, key string, args []string) int {
	switch {
	case len(args) > 0 || key != "":
		return usageExit(io, v, usagef("--list-keys takes only --exercises"))
	case root == "":
		return usageExit(io, v, usagef("--list-keys needs --exercises"))
	}
	keys, err := exerciseKeys(root)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	for _, k := range keys {
		fmt.Fprintln(io.out, k)
	}
	return exitOK
}

// pruneKeyHere prunes one key's exercises on this machine, opts the
// options of every key.
func pruneKeyHere(ctx context.Context, io *stdio, opts pruneguest.GuestOptions) func(key, out string) int {
	return func(key, out string) int {
		found, code := pruneExercises(io, opts.Exercises, key, opts.Only)
		if code != exitOK {
			return code
		}
		o := opts
		o.Key, o.Out, o.Found = key, out, found
		return pruneHere(ctx, io, o)
	}
}

// pruneKeyGuests prunes one key's exercises, each in a fresh guest, opts
// the options of every key.
func pruneKeyGuests(ctx context.Context, io *stdio, kernelArg string, opts pruneguest.HostOptions) func(key, out string) int {
	return func(key, out string) int {
		found, code := pruneExercises(io, opts.Exercises, key, opts.Only)
		if code != exitOK {
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
func pruneAll(ctx context.Context, io *stdio, root, out string, pruneKey func(key, out string) int) int {
	keys, err := exerciseKeys(root)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	return eachKey(ctx, io, "prune", keys, func(k string) string { return "out " + filepath.Join(out, k) },
		func(k string) int { return pruneKey(k, filepath.Join(out, k)) })
}

// pruneExercises are the key's exercises under root (only the one named
// only, if given), and exitOK; another exit status when there are none to
// prune or the testing root was refused, each of its problems printed.
func pruneExercises(io *stdio, root, key, only string) ([]exercise.Found, int) {
	found, err := exercise.ForKey(root, key)
	if err != nil {
		var de *exercise.DiscoveryError
		if errors.As(err, &de) {
			for _, l := range de.Lines() {
				fmt.Fprintf(io.err, "lockstep prune: %s\n", l)
			}
			fmt.Fprintf(io.err, "lockstep prune: the testing root %s was refused; nothing was pruned\n", root)
			return nil, exitFail
		}
		return nil, fail(io, "prune", exitFail, err)
	}
	if len(found) == 0 {
		return nil, fail(io, "prune", exitFail, fmt.Errorf("no exercise of key %q under %s", key, root))
	}
	if only != "" {
		if found, err = exercise.Named(found, only); err != nil {
			return nil, fail(io, "prune", exitUsage, usagef("--only %v", err))
		}
	}
	return found, exitOK
}

// pruneRole is the prune's guest side (pruneguest.GuestRole): the
// exercise the host named, pruned on the running kernel.
func pruneRole(ctx context.Context, io *stdio, opts pruneguest.GuestOptions) int {
	found, code := pruneExercises(io, opts.Exercises, opts.Key, opts.Only)
	if code != exitOK {
		return code
	}
	opts.Found = found
	return pruneHere(ctx, io, opts)
}

// pruneHere prunes each exercise on this machine (pruneguest.Guest) with
// lockstep's own enforcer.
func pruneHere(ctx context.Context, io *stdio, opts pruneguest.GuestOptions) int {
	enf, err := runEnforcer()
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	opts.Enforcer, opts.Log, opts.Done = enf, progressLogger(io, "prune", opts.Quiet), pruneDone(io)
	status, err := pruneguest.Guest(ctx, opts)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	return status
}

// pruneGuests prunes each exercise in a fresh guest (pruneguest.Host).
func pruneGuests(ctx context.Context, io *stdio, kernelArg string, opts pruneguest.HostOptions) int {
	opts.Log = progressLogger(io, "prune", opts.Quiet)
	g, err := resolveGuestKernel(ctx, kernelArg, opts.Log)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	bz := g.bz
	opts.Boot = g.boot
	opts.Kernel, opts.Stderr, opts.Verbose, opts.Done = bz, io.err, io.verbose, pruneDone(io)
	if io.verbose {
		opts.Stdout = io.err
	}
	status, err := pruneguest.Host(ctx, opts)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	return status
}

// pruneDone prints how an exercise's prune ended: its policy or abort here,
// or on the host the reason a guest's exercise has no result (the guest
// printed the rest).
func pruneDone(io *stdio) func(pruneguest.Outcome) {
	return func(o pruneguest.Outcome) {
		switch res := o.Result; {
		case o.Err != nil:
			fmt.Fprintf(io.err, "lockstep prune: %v\n", o.Err)
		case res == nil:
		case res.Aborted != nil:
			fmt.Fprintf(io.err, "lockstep prune: %s_%s: aborted: %s (%s)\n", o.Key, o.Exercise, res.Aborted.Aborted, o.Paths[0])
		default:
			fmt.Fprintf(io.err, "lockstep prune: %s_%s: %s in %s, %s (%s)\n", o.Key, o.Exercise, res.Policy.Hash(),
				plural(res.TotalRuns(), "run"), o.Took.Round(time.Second), strings.Join(o.Paths, ", "))
		}
	}
}

// runEnforcer is lockstep's own enforcer: its run verb, without the
// isolation layers that hide Landlock's refusals (enforcer.MeasureArgs);
// the library's default, prune.EnforcerVerb, is for programs that call
// prune.ServeRoles.
func runEnforcer() ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable for the enforcer: %w", err)
	}
	// Landlock's own refusals are what the pruner measures.
	return append([]string{self, enforcer.Verb}, enforcer.MeasureArgs()...), nil
}
