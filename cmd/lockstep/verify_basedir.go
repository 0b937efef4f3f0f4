package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// referenceExercises is the repository's testing root, relative to its top:
// --base-dir's default --exercises, so a release engineer's one command runs
// from a checkout.
const referenceExercises = "testdata/exercises"

// baseDirResult is --base-dir's --json document: one matrix per base.
type baseDirResult struct {
	Schema  int              `json:"schema"`
	Status  int              `json:"status"`
	BaseDir string           `json:"base_dir"`
	Bases   []*verify.Result `json:"bases"`
	// WallSeconds is the whole run: every base's cells share one pool, so
	// each base's own wall_seconds counts from the common start.
	WallSeconds float64 `json:"wall_seconds"`
}

// runBaseDir verifies every base of --base-dir against its key's exercises
// on every kernel: one matrix per base, every base's cells in one pool, the
// worst status of them.
func (a *verifyArgs) runBaseDir(ctx context.Context, io *stdio) int {
	v := verbs["verify"]
	switch {
	case *a.base != "" || len(a.only) > 0:
		return usageExit(io, v, usagef("--base-dir verifies each base against all its key's exercises: --base and --exercise do not go with it"))
	case *a.html != "":
		return usageExit(io, v, usagef("--html takes one matrix; with --base-dir use --json"))
	case len(a.kernels) == 0:
		return usageExit(io, v, usagef("at least one --kernel is required"))
	}
	if *a.exercises == "" {
		*a.exercises = referenceExercises
	}
	sets, err := verify.ReadBaseDir(*a.baseDir, *a.exercises)
	if err == nil {
		sets, err = verify.SelectBases(sets, a.keys)
	}
	if err != nil {
		return fail(io, "verify", exitUsage, err)
	}
	io, end := withProgressDisplay(io, "verify")
	defer end()
	log := progressLogger(io, "verify", *a.quiet)
	kernels, err := verifyKernels(ctx, a.kernels, log)
	if err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	t0 := time.Now()
	all := make([]verify.HostOptions, len(sets))
	for i, s := range sets {
		if all[i], err = a.baseOptions(io, s, kernels); err != nil {
			return fail(io, "verify", exitUsage, err)
		}
	}
	results, err := verify.HostAll(ctx, *a.parallel, all)
	if err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	out := baseDirResult{Schema: verify.ResultSchema, BaseDir: *a.baseDir, Bases: results, WallSeconds: time.Since(t0).Seconds()}
	for _, res := range results {
		out.Status = verify.WorseStatus(out.Status, res.Status)
	}
	if *a.asJSON {
		return writeJSON(io, "verify", out, out.Status, exitIndeterminate)
	}
	for _, res := range out.Bases {
		fmt.Fprintf(io.out, "== %s (key %s)\n", strings.Join(res.Policies, " + "), res.Key)
		printVerify(io, res)
		printLayers(io, res)
		fmt.Fprintln(io.out)
	}
	fmt.Fprintf(io.out, "status %d: %d base(s) of %s in %.1f s wall, every base's cells in one pool\n", out.Status, len(out.Bases), *a.baseDir, out.WallSeconds)
	return out.Status
}

// baseOptions are one base's matrix (the base, then --config, then the
// layers that apply to each cell); its progress lines name its key, since
// every base's cells finish interleaved.
func (a *verifyArgs) baseOptions(io *stdio, s verify.BaseSet, kernels []verify.Kernel) (verify.HostOptions, error) {
	files := append([]string{s.File}, a.configs...)
	p, err := policy.Load("", files)
	if err != nil {
		return verify.HostOptions{}, err
	}
	opts := a.options(io, p, files)
	opts.Key = s.Key
	opts.Log = progressLogger(io, "verify", *a.quiet)
	opts.Kernels, opts.Layers = kernels, s.Layers
	if progress := opts.Progress; progress != nil {
		opts.Progress = func(format string, args ...any) { progress(s.Key+": "+format, args...) }
	}
	return opts, nil
}

// printLayers says which exercise files each kernel's cells combined, so an
// ABI-10 sidecar left out on an older kernel is visible in the matrix.
func printLayers(io *stdio, res *verify.Result) {
	for _, c := range res.Cells {
		names := make([]string, len(c.Layers))
		for i, l := range c.Layers {
			names[i] = filepath.Base(l)
		}
		if len(names) == 0 {
			names = []string{"(the base alone)"}
		}
		fmt.Fprintf(io.out, "  %s × %s: with %s\n", c.Kernel, c.Exercise, strings.Join(names, ", "))
	}
}
