package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy/tool"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/verify"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "policy",
		Usage:   "policy {check|fmt|hash|diff|union} [--json] [-w] [-l] [--exercise] [--strict] [--normalise] <file>…",
		Short:   "check, format, hash, compare and merge policy (.cfg) files",
		Long:    help("policy", nil),
		Example: example("policy"),
		Flags:   policyFlags,
	})
}

// policyFlags declares policy's flags on fs and returns the verb.
func policyFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	o := &policyOpts{fs: fs}
	fs.BoolVar(&o.json, "json", false, "check, hash: print one JSON document (schema 1) on stdout")
	fs.BoolVar(&o.write, "w", false, "fmt: rewrite each file in canonical form")
	fs.BoolVar(&o.list, "l", false, "fmt: list files that are not in canonical form")
	fs.BoolVar(&o.exercise, "exercise", false, "check: require [read], [execute] and [ioctl] paths to exist (exercise config)")
	fs.BoolVar(&o.strict, "strict", false, "check: any warning (a grant wider than it looks) exits 1")
	fs.BoolVar(&o.normalise, "normalise", false, "union: raise paths whose rights are a strict subset of an ancestor's")
	return o.run
}

// run parses the flags that follow the subcommand and runs it.
func (o *policyOpts) run(ctx context.Context, io *cli.Stdio, args []string) int {
	v := verbs["policy"]
	if len(args) == 0 {
		return cli.UsageExit(io, v, cli.Usagef("no subcommand; want one of check, fmt, hash, diff, union"))
	}
	sub := args[0]
	// Flags may also follow the subcommand.
	if err := o.fs.Parse(args[1:]); err != nil {
		return cli.UsageExit(io, v, err)
	}
	files := o.fs.Args()
	if len(files) == 0 {
		return cli.UsageExit(io, v, cli.Usagef("policy %s: no files given", sub))
	}
	t := &tool.Tool{Out: io.Out, Err: io.Err, JSON: o.json, Exercise: o.exercise, Strict: o.strict, Write: o.write, List: o.list, Normalise: o.normalise}
	switch sub {
	case "check":
		return o.report(io)(t.Check(files))
	case "fmt":
		if o.write && o.list {
			return cli.UsageExit(io, v, cli.Usagef("-w and -l exclude each other"))
		}
		return t.Fmt(files)
	case "hash":
		return o.report(io)(t.Hash(files))
	case "diff":
		if len(files) != 2 {
			return cli.UsageExit(io, v, cli.Usagef("policy diff takes exactly two files, got %d", len(files)))
		}
		return t.Diff(files[0], files[1])
	case "union":
		return t.Union(files)
	}
	return cli.UsageExit(io, v, cli.Usagef("unknown subcommand %q; want one of check, fmt, hash, diff, union", sub))
}

// report is the end of check and hash: with --json the report printed,
// and the status.
func (o *policyOpts) report(io *cli.Stdio) func(rep *tool.Report, code int) int {
	return func(rep *tool.Report, code int) int {
		if o.json {
			return writeJSON(io, "policy", rep, code, cli.ExitFail)
		}
		return code
	}
}

// policyOpts are policy's flags.
type policyOpts struct {
	fs                                             *flag.FlagSet
	json, write, list, exercise, normalise, strict bool
}

// writeJSON prints v as indented JSON and returns code, the verb's status;
// when the output cannot be written whole (a full disk, a closed pipe) it
// says so and returns the worse of code and failed: a reader of a cut
// document must not take the status for the result.
func writeJSON(io *cli.Stdio, verb string, v any, code, failed int) int {
	enc := json.NewEncoder(io.Out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return cli.Fail(io, verb, verify.WorseStatus(code, failed), fmt.Errorf("the JSON result was not written whole: %w", err))
	}
	return code
}
