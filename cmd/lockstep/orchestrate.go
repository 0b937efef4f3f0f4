package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/orchestrate"
)

func init() {
	register(&verb{
		Name:  "orchestrate",
		Usage: "orchestrate --langs <k1,k2,…> --path-dir <dir> --core-dir <dir> [--kvm-dir <dir>]… [--runtime-chdir <dir>] [--allow-unknown-root] [--json] [--summary <file>]",
		Short: "merge pruned exercise policies and ABI-10 sidecars into the shipped bases",
		Long: `Checks every input first and collects every problem: aborted exercises,
retired .paths files, a record without its .cfg and the reverse, record schema,
stage, key and exercise, the SHA-256 each record names against the raw bytes
beside it, and every ABI-10 record and sidecar (verified, no mismatches, the
.cfg it verified, Landlock ABI 10 or above, the sidecar's hash, nothing but
"[bind] allow <port> udp" rows). Any problem: exit 1, and nothing is written.

Then writes, under --core-dir: BaseLanguage-<lang>.cfg (the union of the
language's exercises, hierarchy raised, no limits), exercises/<lang>_<ex>.cfg
(what the base lacks: in practice the limits), Abi10-<lang>.cfg and
exercises/<lang>_<ex>.abi10.cfg (the ABI-10 rows, never in any Base*.cfg),
BasePhobos.cfg (omitted with a warning when an [execute] grant would overlap
a write-class grant across languages), TailPhobos.cfg, and debug/ files for
review. The tree is replaced atomically: a refusal, an error or a crash
leaves the previous tree as it was.

With --kvm-dir given twice or more, the sidecars of every observer run must
hold the same rows (comment lines ignored); the first directory's files are
merged. Without --kvm-dir the ABI-10 files are read from --path-dir.

Every ABI-10 record must name the root file system its exercise's policy was
pruned on (provenance.root_digest, equal in both records). A record without
one beside a record with one (a prune by Phobos's container stage records
none) is refused unless --allow-unknown-root is given; then the pair is
merged and named on stderr, in the summaries and in comments atop the
exercise's files in the tree. Two different digests are always refused.

--json prints one summary document (schema_version 1: languages, exercises,
rows, files, warnings, unknown_roots; on a refusal "refused": true and
"problems").
--summary appends a Markdown summary to a file, e.g. $GITHUB_STEP_SUMMARY;
it is opened before the merge and must be a regular file (or a new one).
--core-dir must not be or hold the current directory.
See docs/orchestrate.md.`,
		Example: `# merge one language after a container prune and two guest runs
$ lockstep orchestrate --langs java --path-dir path_sets --kvm-dir kvm-24.04 --kvm-dir kvm-26.04 --core-dir core --summary "$GITHUB_STEP_SUMMARY"

# merge records pruned by Phobos's container stage (no root digest) with a
# lockstep observation (make demo's last step)
$ lockstep orchestrate --langs fixture --path-dir out/demo/path_sets --core-dir out/demo/core --allow-unknown-root`,
		Flags: orchestrateFlags,
	})
}

// orchestrateArgs are orchestrate's flags.
type orchestrateArgs struct {
	langs, pathDir, coreDir, chdir, summary *string
	kvmDirs                                 multiFlag
	asJSON, allowUnknownRoot                *bool
}

// orchestrateFlags declares orchestrate's flags on fs and returns the verb.
func orchestrateFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	o := &orchestrateArgs{}
	o.langs = fs.String("langs", "", "comma-separated language `keys`, in order")
	o.pathDir = fs.String("path-dir", "", "`dir`ectory of the pruner's <lang>_<ex>.{cfg,json} (and ABI-10 files without --kvm-dir)")
	o.coreDir = fs.String("core-dir", "", "output tree `dir`ectory, replaced atomically")
	fs.Var(&o.kvmDirs, "kvm-dir", "observer results `dir`ectory (repeatable; two or more must agree row for row)")
	o.chdir = fs.String("runtime-chdir", orchestrate.DefaultRuntimeChdir, "working `dir`ectory written to TailPhobos.cfg")
	o.allowUnknownRoot = fs.Bool("allow-unknown-root", false, "merge an exercise whose record or ABI-10 record has no provenance.root_digest beside one that has, and name it (different digests are refused regardless)")
	o.asJSON = fs.Bool("json", false, "print one JSON summary document on stdout")
	o.summary = fs.String("summary", "", "append a Markdown summary to `file` (e.g. $GITHUB_STEP_SUMMARY)")
	return o.run
}

// run checks the flags, merges and reports.
func (o *orchestrateArgs) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["orchestrate"]
	if len(args) > 0 {
		return usageExit(io, v, usagef("unexpected arguments %q", args))
	}
	if *o.langs == "" || *o.pathDir == "" || *o.coreDir == "" {
		return usageExit(io, v, usagef("--langs, --path-dir and --core-dir are required"))
	}
	if err := orchestrate.RepeatedDir(o.kvmDirs); err != nil {
		return usageExit(io, v, usagef("%v", err))
	}
	var keys []string
	for _, k := range strings.Split(*o.langs, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	// The summary is opened before the merge, so that a path that
	// cannot take it (a directory, a FIFO) fails while the
	// previous tree is still in place.
	var md *os.File
	if *o.summary != "" {
		f, err := safefile.OpenAppend(*o.summary, 0o644)
		if err != nil {
			return fail(io, "orchestrate", exitFail, fmt.Errorf("--summary: %w; nothing was written", err))
		}
		defer f.Close()
		md = f
	}
	level := slog.LevelWarn
	if io.verbose {
		level = slog.LevelInfo
	}
	sum, err := orchestrate.Run(orchestrate.Options{
		Langs: keys, PathDir: *o.pathDir, CoreDir: *o.coreDir, KVMDirs: o.kvmDirs,
		RuntimeChdir: *o.chdir, AllowUnknownRoot: *o.allowUnknownRoot,
		Log: slog.New(slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: level})),
	})
	var ref *orchestrate.Refusal
	switch {
	case errors.As(err, &ref):
		return o.refused(io, md, ref)
	case err != nil:
		return fail(io, "orchestrate", exitFail, err)
	}
	return o.merged(io, md, sum)
}

// refused reports a refusal's problems: on stderr, in the Markdown summary
// and, with --json, on stdout.
func (o *orchestrateArgs) refused(io *stdio, md *os.File, ref *orchestrate.Refusal) int {
	for _, p := range ref.Problems {
		fmt.Fprintf(io.err, "lockstep orchestrate: %s\n", p)
	}
	fmt.Fprintf(io.err, "lockstep orchestrate: refused (%s); nothing was written\n", plural(len(ref.Problems), "problem"))
	if code := appendSummary(io, md, ref.Markdown(), false); code != exitOK {
		return code
	}
	if *o.asJSON {
		return writeJSON(io, "orchestrate", map[string]any{"schema_version": orchestrate.SummarySchema, "refused": true, "problems": ref.Problems}, exitFail, exitFail)
	}
	return exitFail
}

// merged reports a written tree: its warnings on stderr, the Markdown
// summary, and the JSON document or one line per language on stdout.
func (o *orchestrateArgs) merged(io *stdio, md *os.File, sum *orchestrate.Summary) int {
	for _, w := range sum.Warnings {
		fmt.Fprintf(io.err, "lockstep orchestrate: warning: %s\n", w)
	}
	for _, u := range sum.UnknownRoots {
		fmt.Fprintf(io.err, "lockstep orchestrate: warning: %s: %s has no root digest; merged by --allow-unknown-root beside %s (root %s)\n", u.Exercise, u.Record, u.Beside, u.BesideRoot)
	}
	if code := appendSummary(io, md, sum.Markdown(), true); code != exitOK {
		return code
	}
	if *o.asJSON {
		doc := struct {
			*orchestrate.Summary
			Refused  bool     `json:"refused"`
			Problems []string `json:"problems"`
		}{sum, false, []string{}}
		return writeJSON(io, "orchestrate", doc, exitOK, exitFail)
	}
	for _, l := range sum.Languages {
		fmt.Fprintf(io.out, "%s: %s, base %s, %s, %s\n", l.Name, plural(len(l.Exercises), "exercise"), plural(l.BaseRows, "row"),
			plural(len(l.ABI10Rows), "ABI-10 row"), l.BaseHash)
	}
	fmt.Fprintf(io.out, "wrote %s to %s\n", plural(len(sum.Files), "file"), sum.CoreDir)
	return exitOK
}

// appendSummary appends md to f (nil does nothing). written says the tree
// is already in place, which the error then says too.
func appendSummary(io *stdio, f *os.File, md string, written bool) int {
	if f == nil {
		return exitOK
	}
	_, err := f.WriteString(md + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return exitOK
	}
	if written {
		return fail(io, "orchestrate", exitFail, fmt.Errorf("the tree was written, but the Markdown summary was not: %w", err))
	}
	return fail(io, "orchestrate", exitFail, fmt.Errorf("write the Markdown summary: %w", err))
}
