package main

import (
	"context"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// referenceExercises is the repository's testing root, relative to its top:
// --base-dir's default --exercises, so a release engineer's one command runs
// from a checkout.
const referenceExercises = "testdata/exercises"

// runBaseDir verifies every base of --base-dir against its key's exercises
// on every kernel: one matrix per base, every base's cells in one pool, the
// worst status of them.
func (a *verifyArgs) runBaseDir(ctx context.Context, io *cli.Stdio) int {
	v := verbs["verify"]
	switch {
	case *a.base != "" || len(a.only) > 0:
		return cli.UsageExit(io, v, cli.Usagef("--base-dir verifies each base against all its key's exercises: --base and --exercise do not go with it"))
	case *a.html != "":
		return cli.UsageExit(io, v, cli.Usagef("--html takes one matrix; with --base-dir use --json"))
	case len(a.kernels) == 0:
		return cli.UsageExit(io, v, cli.Usagef("at least one --kernel is required"))
	}
	if *a.exercises == "" {
		*a.exercises = referenceExercises
	}
	sets, err := verify.ReadBaseDir(*a.baseDir, *a.exercises)
	if err == nil {
		sets, err = verify.SelectBases(sets, a.keys)
	}
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitUsage, err)
	}
	io, end := io.WithDisplay("verify")
	defer end()
	log := io.ProgressLog("verify", *a.quiet)
	kernels, err := verifyKernels(ctx, a.kernels, log)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	t0 := time.Now()
	all := make([]verify.HostOptions, len(sets))
	for i, s := range sets {
		if all[i], err = a.baseOptions(io, s, kernels); err != nil {
			return cli.Fail(io, "verify", cli.ExitUsage, err)
		}
	}
	results, err := verify.HostAll(ctx, *a.parallel, all)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	out := verify.BaseDirResult{Schema: verify.ResultSchema, BaseDir: *a.baseDir, Bases: results, WallSeconds: time.Since(t0).Seconds()}
	for _, res := range results {
		out.Status = verify.WorseStatus(out.Status, res.Status)
	}
	if *a.asJSON {
		return writeJSON(io, "verify", out, out.Status, cli.ExitIndeterminate)
	}
	report.BaseDirText(io.Out, &out)
	return out.Status
}

// baseOptions are one base's matrix (the base, then --config, then the
// layers that apply to each cell); its progress lines name its key, since
// every base's cells finish interleaved.
func (a *verifyArgs) baseOptions(io *cli.Stdio, s verify.BaseSet, kernels []verify.Kernel) (verify.HostOptions, error) {
	files := append([]string{s.File}, a.configs...)
	p, err := policy.Load("", files)
	if err != nil {
		return verify.HostOptions{}, err
	}
	opts := a.options(io, p, files)
	opts.Key = s.Key
	opts.Log = io.ProgressLog("verify", *a.quiet)
	opts.Kernels, opts.Layers = kernels, s.Layers
	if progress := opts.Progress; progress != nil {
		opts.Progress = func(format string, args ...any) { progress(s.Key+": "+format, args...) }
	}
	return opts, nil
}
