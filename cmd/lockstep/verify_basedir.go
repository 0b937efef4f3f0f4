package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

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
}

// runBaseDir verifies every base of --base-dir against its key's exercises
// on every kernel: one matrix per base, the worst status of them.
func (a *verifyArgs) runBaseDir(ctx context.Context, io *stdio) int {
	v := verbs["verify"]
	switch {
	case *a.base != "" || *a.key != "" || len(a.only) > 0:
		return usageExit(io, v, usagef("--base-dir verifies each base against all its key's exercises: --base, --key and --exercise do not go with it"))
	case *a.html != "":
		return usageExit(io, v, usagef("--html takes one matrix; with --base-dir use --json"))
	case len(a.kernels) == 0:
		return usageExit(io, v, usagef("at least one --kernel is required"))
	}
	if *a.exercises == "" {
		*a.exercises = referenceExercises
	}
	sets, err := verify.ReadBaseDir(*a.baseDir, *a.exercises)
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
	out := baseDirResult{Schema: verify.ResultSchema, BaseDir: *a.baseDir}
	for _, s := range sets {
		res, err := a.verifyBase(ctx, io, s, kernels)
		if err != nil {
			return fail(io, "verify", exitIndeterminate, err)
		}
		out.Bases = append(out.Bases, res)
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
	fmt.Fprintf(io.out, "status %d: %d base(s) of %s\n", out.Status, len(out.Bases), *a.baseDir)
	return out.Status
}

// verifyBase runs one base's matrix (the base, then --config, then the
// layers that apply to each cell).
func (a *verifyArgs) verifyBase(ctx context.Context, io *stdio, s verify.BaseSet, kernels []verify.Kernel) (*verify.Result, error) {
	files := append([]string{s.File}, a.configs...)
	p, err := policy.Load("", files)
	if err != nil {
		return nil, err
	}
	opts := a.options(io, p, files)
	opts.Key = s.Key
	opts.Log = progressLogger(io, "verify", *a.quiet)
	opts.Kernels, opts.Layers = kernels, s.Layers
	return verify.Host(ctx, opts)
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
