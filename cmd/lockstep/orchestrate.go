package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/orchestrate"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "orchestrate",
		Usage:   "orchestrate --langs <k1,k2,…> --path-dir <dir> --core-dir <dir> [--kvm-dir <dir>]… [--runtime-chdir <dir>] [--allow-unknown-root] [--json] [--summary <file>]",
		Short:   "merge pruned exercise policies and ABI-10 sidecars into the shipped bases",
		Long:    help("orchestrate", nil),
		Example: example("orchestrate"),
		Flags:   orchestrateFlags,
	})
}

// orchestrateArgs are orchestrate's flags.
type orchestrateArgs struct {
	langs, pathDir, coreDir, chdir, summary *string
	kvmDirs                                 cli.MultiFlag
	asJSON, allowUnknownRoot                *bool
}

// orchestrateFlags declares orchestrate's flags on fs and returns the verb.
func orchestrateFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
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
func (o *orchestrateArgs) run(ctx context.Context, io *cli.Stdio, args []string) int {
	v := verbs["orchestrate"]
	if len(args) > 0 {
		return cli.UsageExit(io, v, cli.Usagef("unexpected arguments %q", args))
	}
	if *o.langs == "" || *o.pathDir == "" || *o.coreDir == "" {
		return cli.UsageExit(io, v, cli.Usagef("--langs, --path-dir and --core-dir are required"))
	}
	if err := orchestrate.RepeatedDir(o.kvmDirs); err != nil {
		return cli.UsageExit(io, v, cli.Usagef("%v", err))
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
			return cli.Fail(io, "orchestrate", cli.ExitFail, fmt.Errorf("--summary: %w; nothing was written", err))
		}
		defer f.Close()
		md = f
	}
	level := slog.LevelWarn
	if io.Verbose {
		level = slog.LevelInfo
	}
	sum, err := orchestrate.Run(orchestrate.Options{
		Langs: keys, PathDir: *o.pathDir, CoreDir: *o.coreDir, KVMDirs: o.kvmDirs,
		RuntimeChdir: *o.chdir, AllowUnknownRoot: *o.allowUnknownRoot,
		Log: slog.New(slog.NewTextHandler(io.Err, &slog.HandlerOptions{Level: level})),
	})
	var ref *orchestrate.Refusal
	switch {
	case errors.As(err, &ref):
		return o.refused(io, md, ref)
	case err != nil:
		return cli.Fail(io, "orchestrate", cli.ExitFail, err)
	}
	return o.merged(io, md, sum)
}

// refused reports a refusal's problems: on stderr, in the Markdown summary
// and, with --json, on stdout.
func (o *orchestrateArgs) refused(io *cli.Stdio, md *os.File, ref *orchestrate.Refusal) int {
	for _, p := range ref.Problems {
		fmt.Fprintf(io.Err, "lockstep orchestrate: %s\n", p)
	}
	fmt.Fprintf(io.Err, "lockstep orchestrate: refused (%s); nothing was written\n", cli.Plural(len(ref.Problems), "problem"))
	if code := appendSummary(io, md, ref.Markdown(), false); code != cli.ExitOK {
		return code
	}
	if *o.asJSON {
		return writeJSON(io, "orchestrate", map[string]any{"schema_version": orchestrate.SummarySchema, "refused": true, "problems": ref.Problems}, cli.ExitFail, cli.ExitFail)
	}
	return cli.ExitFail
}

// merged reports a written tree: its warnings on stderr, the Markdown
// summary, and the JSON document or one line per language on stdout.
func (o *orchestrateArgs) merged(io *cli.Stdio, md *os.File, sum *orchestrate.Summary) int {
	for _, w := range sum.Warnings {
		fmt.Fprintf(io.Err, "lockstep orchestrate: warning: %s\n", w)
	}
	for _, u := range sum.UnknownRoots {
		fmt.Fprintf(io.Err, "lockstep orchestrate: warning: %s: %s has no root digest; merged by --allow-unknown-root beside %s (root %s)\n", u.Exercise, u.Record, u.Beside, u.BesideRoot)
	}
	if code := appendSummary(io, md, sum.Markdown(), true); code != cli.ExitOK {
		return code
	}
	if *o.asJSON {
		doc := struct {
			*orchestrate.Summary
			Refused  bool     `json:"refused"`
			Problems []string `json:"problems"`
		}{sum, false, []string{}}
		return writeJSON(io, "orchestrate", doc, cli.ExitOK, cli.ExitFail)
	}
	sum.WriteText(io.Out)
	return cli.ExitOK
}

// appendSummary appends md to f (nil does nothing). written says the tree
// is already in place, which the error then says too.
func appendSummary(io *cli.Stdio, f *os.File, md string, written bool) int {
	if f == nil {
		return cli.ExitOK
	}
	_, err := f.WriteString(md + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return cli.ExitOK
	}
	if written {
		return cli.Fail(io, "orchestrate", cli.ExitFail, fmt.Errorf("the tree was written, but the Markdown summary was not: %w", err))
	}
	return cli.Fail(io, "orchestrate", cli.ExitFail, fmt.Errorf("write the Markdown summary: %w", err))
}
