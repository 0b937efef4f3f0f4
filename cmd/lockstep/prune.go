package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/pruner/contain"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/prune"
	"github.com/lockstep-sandbox/lockstep/pruner/record"
)

// Where the guest sees the prune's read-only inputs.
const (
	pruneGuestExercises = "/run/lockstep/share/exercises"
	pruneGuestSeeds     = "/run/lockstep/share/seeds"
)

func init() {
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
		Usage: "prune --key <key> --exercises <dir> --out <dir> [--in-guest | --on-host] [--kernel <pin>|<file>] [--root <dir>] [--accel {auto|kvm|tcg}] [--seeds <dir>] [--only <exercise>] [--check-minimality]",
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

By default each exercise is pruned in a fresh throwaway guest (--kernel, the
pinned kernel by default; --root, the host's / by default, read-only with a
tmpfs overlay), so every run starts from a cold cache and nothing the prune
deletes is the host's. --in-guest is that guest's side. --on-host prunes on
this machine instead, and only when LOCKSTEP_DISPOSABLE=1 declares it
disposable: the prune deletes and recreates /var/tmp/testing-dir and plants
canary files.

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
	key := fs.String("key", "", "language `key` whose exercises are pruned")
	root := fs.String("exercises", "", "testing root `dir`ectory (<dir>/<family>/<exercise>/)")
	out := fs.String("out", "", "output `dir`ectory for <key>_<exercise>.cfg/.json/.aborted.json")
	inGuest := fs.Bool("in-guest", false, "prune on the running kernel (the guest's side)")
	onHost := fs.Bool("on-host", false, "prune on this machine; needs LOCKSTEP_DISPOSABLE=1")
	kernelArg := strictString(fs, "kernel", kernel.DefaultPin, "kernel `pin` or bzImage file of the guests", wantKernel)
	rootDir := fs.String("root", "", "guest root `dir`ectory (default: this host's /)")
	accel := fs.String("accel", harness.AccelAuto, "accelerator: `auto`, kvm or tcg")
	seeds := fs.String("seeds", "", "`dir`ectory of the seed files prune.json may name (default: the seeds shipped with lockstep)")
	only := fs.String("only", "", "prune only the `exercise` of this folder name")
	workDir := fs.String("work-dir", exercise.DefaultWorkDir, "working `dir`ectory of every run (with --in-guest or --on-host)")
	skipContain := fs.Bool("skip-containment", false, "leave out the containment checks (recorded; for development)")
	rootDigest := fs.String("root-digest", "", "with --in-guest or --on-host: provenance.root_digest of the records, the `digest` of the root the prune runs on (default: taken of / here)")
	minimal := fs.Bool("check-minimality", false, "after verifying, drop each grant in turn and record whether the exercise still passes (one run per grant)")
	quiet := fs.Bool("q", false, "quiet: no progress lines (a line per stage and run), only warnings and each exercise's result")
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["prune"]
		io, end := withProgressDisplay(io, "prune")
		defer end()
		switch {
		case len(args) > 0:
			return usageExit(io, v, usagef("unexpected arguments %q", args))
		case !exercise.ValidKey(*key):
			return usageExit(io, v, usagef("--key %q: want lower-case words joined by hyphens, e.g. java-gradle", *key))
		case *root == "" || *out == "":
			return usageExit(io, v, usagef("--exercises and --out are required"))
		case *inGuest && *onHost:
			return usageExit(io, v, usagef("--in-guest and --on-host exclude each other"))
		}
		if err := checkAccel(*accel); err != nil {
			return usageExit(io, v, err)
		}
		found, code := pruneExercises(io, *root, *key, *only)
		if code != exitOK {
			return code
		}
		// The key's earlier artefacts are removed (as Phobos does) only once
		// nothing more can refuse the prune: a refusal leaves --out as it was.
		out := &pruneOut{dir: *out, key: *key, clean: *only == ""}
		if *inGuest || *onHost {
			if err := prune.Disposable(); err != nil {
				return fail(io, "prune", exitRefused, err)
			}
			digest, err := rootDigestFlag(*rootDigest)
			if err != nil {
				return rootDigestExit(io, v, err)
			}
			if err := out.prepare(); err != nil {
				return fail(io, "prune", exitFail, err)
			}
			enf, err := runEnforcer()
			if err != nil {
				return fail(io, "prune", exitFail, err)
			}
			opts := prune.Options{Enforcer: enf, WorkDir: *workDir, SeedDir: *seeds, SkipContainment: *skipContain,
				CheckMinimality: *minimal, RootDigest: digest, Log: progressLogger(io, "prune", *quiet)}
			return pruneHere(ctx, io, found, opts, out.dir)
		}
		return pruneGuests(ctx, io, found, pruneGuestArgs{key: *key, root: *root, out: out, kernel: *kernelArg,
			rootDir: *rootDir, accel: *accel, seeds: *seeds, skipContain: *skipContain, minimal: *minimal, quiet: *quiet})
	}
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

// pruneOut is the prune's --out: made if missing and, for a prune of the
// whole key, rid of the key's earlier artefacts, once (prepare).
type pruneOut struct {
	dir, key string
	clean    bool
	prepared bool
}

func (o *pruneOut) prepare() error {
	if o.prepared {
		return nil
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if o.clean {
		if err := pruneClean(o.dir, o.key); err != nil {
			return err
		}
	}
	o.prepared = true
	return nil
}

// pruneClean removes a key's stale artefacts from out, as Phobos does.
func pruneClean(out, key string) error {
	for _, pat := range []string{"*.cfg", "*.json"} {
		ms, err := filepath.Glob(filepath.Join(out, key+"_"+pat))
		if err != nil {
			return err
		}
		for _, m := range ms {
			if strings.HasSuffix(m, record.KVMSuffix) || strings.HasSuffix(m, record.KVMConfigSuffix) {
				continue
			}
			if err := os.Remove(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// pruneHere prunes each exercise on this machine.
func pruneHere(ctx context.Context, io *stdio, found []exercise.Found, opts prune.Options, out string) int {
	code := exitOK
	for i, f := range found {
		opts.Log.Info(fmt.Sprintf("%s_%s: exercise %d of %d", f.Key, f.Name, i+1, len(found)))
		start := time.Now()
		ex, err := exercise.Read(f)
		var res *prune.Result
		if err != nil {
			res = pruneRefused(ctx, f, err, opts.RootDigest)
		} else if res, err = prune.Prune(ctx, ex, opts); err != nil {
			return fail(io, "prune", exitFail, fmt.Errorf("%s_%s: %w", f.Key, f.Name, err))
		}
		paths, err := res.Write(out)
		if err != nil {
			return fail(io, "prune", exitFail, err)
		}
		if res.Aborted != nil {
			code = exitFail
			fmt.Fprintf(io.err, "lockstep prune: %s_%s: aborted: %s (%s)\n", f.Key, f.Name, res.Aborted.Aborted, paths[0])
			continue
		}
		fmt.Fprintf(io.err, "lockstep prune: %s_%s: %s in %d runs, %s (%s)\n", f.Key, f.Name, res.Policy.Hash(),
			res.TotalRuns(), time.Since(start).Round(time.Second), strings.Join(paths, ", "))
	}
	return code
}

// pruneRefused is the abort of an exercise that does not meet the contract.
func pruneRefused(ctx context.Context, f exercise.Found, err error, rootDigest string) *prune.Result {
	prov := record.NewProvenance(time.Now(), -1, record.StraceVersion(ctx))
	prov.RootDigest = rootDigest
	return &prune.Result{Key: f.Key, Exercise: f.Name, Aborted: &record.Aborted{
		SchemaVersion: record.ExerciseSchema, Key: f.Key, Exercise: f.Name, Stage: record.StageAll,
		Aborted:    strings.ReplaceAll(err.Error(), "\n", "; "),
		Evidence:   map[string]any{"record": []any{}},
		Provenance: prov,
	}}
}

type pruneGuestArgs struct {
	key, root, kernel, rootDir, accel, seeds string
	out                                      *pruneOut
	skipContain, minimal, quiet              bool
}

// pruneGuests prunes each exercise in a fresh guest and copies what it
// wrote into out.
func pruneGuests(ctx context.Context, io *stdio, found []exercise.Found, a pruneGuestArgs) int {
	log := progressLogger(io, "prune", a.quiet)
	bz, err := resolveKernel(ctx, a.kernel, log)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	rootAbs, err := filepath.Abs(a.root)
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	shares := []harness.Share{{Source: rootAbs, GuestPath: pruneGuestExercises}}
	// The guest's root is hashed here, where it is a plain directory.
	digest, err := rootdigest.Of(rootdigest.RootOr(a.rootDir))
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	cmd := []string{proto.GuestBinary, "prune", "--in-guest", "--key", a.key, "--exercises", pruneGuestExercises, "--out", proto.ResultsDir,
		"--root-digest", digest}
	if a.seeds != "" {
		s, err := filepath.Abs(a.seeds)
		if err != nil {
			return fail(io, "prune", exitFail, err)
		}
		shares = append(shares, harness.Share{Source: s, GuestPath: pruneGuestSeeds})
		cmd = append(cmd, "--seeds", pruneGuestSeeds)
	}
	if a.skipContain {
		cmd = append(cmd, "--skip-containment")
	}
	if a.minimal {
		cmd = append(cmd, "--check-minimality")
	}
	if a.quiet {
		cmd = append(cmd, "-q")
	}
	code := exitOK
	for i, f := range found {
		log.Info(fmt.Sprintf("%s_%s: exercise %d of %d, in a fresh guest on kernel %s", f.Key, f.Name, i+1, len(found), a.kernel))
		if c := pruneOneGuest(ctx, io, log, bz, shares, append(append([]string(nil), cmd...), "--only", f.Name), f, a); c > code {
			code = c
		}
	}
	return code
}

func pruneOneGuest(ctx context.Context, io *stdio, log *slog.Logger, bz string, shares []harness.Share, cmd []string, f exercise.Found, a pruneGuestArgs) int {
	dir, err := os.MkdirTemp("", "lockstep-prune-guest.")
	if err != nil {
		return fail(io, "prune", exitFail, err)
	}
	defer os.RemoveAll(dir)
	guestOut := io.err
	if !io.verbose {
		guestOut = nil
	}
	res, err := harness.Run(ctx, harness.Options{Kernel: bz, Root: a.rootDir, Shares: shares, Accel: a.accel,
		MemMB: 1024, ResultsDir: dir, Command: cmd, Stdout: guestOut, Stderr: io.err, Verbose: io.verbose, Log: log})
	if res == nil {
		return fail(io, "prune", exitFail, err)
	}
	if err != nil {
		c := exitIndeterminate
		if errors.Is(err, harness.ErrGuestSetup) {
			c = exitGuestSetup
		}
		return fail(io, "prune", c, fmt.Errorf("%s_%s: guest on %s: %w", f.Key, f.Name, filepath.Base(bz), err))
	}
	stem := f.Key + "_" + f.Name
	// Only now, with a guest's results in hand, is --out prepared: a
	// prune that no guest could run (no QEMU, KVM asked for and
	// unusable) leaves the earlier artefacts where they were.
	if err := a.out.prepare(); err != nil {
		return fail(io, "prune", exitFail, err)
	}
	copied := 0
	for _, suf := range []string{record.ConfigSuffix, record.ExerciseSuffix, record.AbortedSuffix} {
		b, err := safefile.ReadFile(filepath.Join(dir, stem+suf), 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(io, "prune", exitIndeterminate, err)
		}
		if err := safefile.WriteFile(filepath.Join(a.out.dir, stem+suf), b, 0o644); err != nil {
			return fail(io, "prune", exitFail, err)
		}
		copied++
	}
	if copied == 0 {
		return fail(io, "prune", exitIndeterminate, fmt.Errorf("%s: the guest exited %d and wrote no policy or record", stem, res.Status))
	}
	if res.Status != exitOK {
		return exitFail
	}
	return exitOK
}

// runEnforcer is lockstep's own enforcer: its run verb, as it always was;
// the library's default, prune.EnforcerVerb, is for programs that call
// prune.ServeRoles.
func runEnforcer() ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable for the enforcer: %w", err)
	}
	return []string{self, "run"}, nil
}
