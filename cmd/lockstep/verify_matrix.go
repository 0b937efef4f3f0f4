package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// maxLegResult bounds one leg's result document.
const maxLegResult = 64 << 20

// runMatrix is --plan and --summarise, the kernel-matrix workflow's plan
// and summary jobs (docs/ci.md), over one selection: the bases of
// --base-dir (--key keeps some) × the pins --kernel names (default: every
// pin of the table, pin files' included). --plan prints the plan as one line of JSON; --summarise
// DIR fills its bases × kernels table from the legs' `verify --base-dir
// --json` documents under DIR and prints it as Markdown (--json: the table
// as a document; --html: the report page).
func (a *verifyArgs) runMatrix(io *stdio) int {
	v := verbs["verify"]
	switch {
	case *a.plan && *a.summarise != "":
		return usageExit(io, v, usagef("--plan and --summarise are two steps of the matrix: give one"))
	case *a.baseDir == "":
		return usageExit(io, v, usagef("--plan and --summarise plan the bases of --base-dir: give it"))
	case *a.base != "" || len(a.only) > 0:
		return usageExit(io, v, usagef("--plan and --summarise take every exercise of each base of --base-dir: --base and --exercise do not go with them"))
	case *a.plan && *a.html != "":
		return usageExit(io, v, usagef("--html is the table of --summarise, not of --plan"))
	}
	if *a.exercises == "" {
		*a.exercises = referenceExercises
	}
	plan, err := a.matrixPlan()
	if err != nil {
		return usageExit(io, v, err)
	}
	if *a.plan {
		b, err := json.Marshal(plan)
		if err != nil {
			return fail(io, "verify", exitIndeterminate, err)
		}
		fmt.Fprintln(io.out, string(b))
		return exitOK
	}
	results, err := readLegResults(*a.summarise)
	if err != nil {
		return fail(io, "verify", exitUsage, err)
	}
	m, err := verify.NewMatrix(plan, results)
	if err != nil {
		return fail(io, "verify", exitUsage, err)
	}
	if err := writeReport(*a.html, func() ([]byte, error) {
		return report.VerifyMatrix(m, report.Meta{Title: "lockstep kernel matrix: " + *a.baseDir, Started: time.Now()})
	}); err != nil {
		return fail(io, "verify", exitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "verify", m, m.Status, exitIndeterminate)
	}
	fmt.Fprint(io.out, m.Markdown())
	return m.Status
}

// matrixPlan is the selection's plan: the bases are checked as --base-dir
// checks them, each kernel must be a pin (a leg provides its kernel by pin).
func (a *verifyArgs) matrixPlan() (*verify.Plan, error) {
	sets, err := verify.ReadBaseDir(*a.baseDir, *a.exercises)
	if err == nil {
		sets, err = verify.SelectBases(sets, a.keys)
	}
	if err != nil {
		return nil, err
	}
	kernels := []string(a.kernels)
	if len(kernels) == 0 {
		// Every pin: the shipped ones, then those of --pins and LOCKSTEP_PINS.
		all, err := kernel.AllPins()
		if err != nil {
			return nil, err
		}
		for _, p := range all {
			kernels = append(kernels, p.Version)
		}
	}
	for _, k := range kernels {
		if _, err := kernel.Lookup(k); err != nil {
			return nil, usagef("--kernel %s: a leg provides its kernel by pin (%v)", k, err)
		}
	}
	return verify.NewPlan(verify.SortedKeys(sets), kernels)
}

// readLegResults reads every *.json under dir, each a `verify --base-dir
// --json` document (a leg's artefact), and returns their bases' results.
func readLegResults(dir string) ([]*verify.Result, error) {
	var out []*verify.Result
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		b, err := safefile.ReadFile(path, maxLegResult)
		if err != nil {
			return err
		}
		var doc baseDirResult
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s: not a verify --base-dir --json document: %w", path, err)
		}
		if doc.Schema != verify.ResultSchema {
			return fmt.Errorf("%s: schema %d, want %d", path, doc.Schema, verify.ResultSchema)
		}
		out = append(out, doc.Bases...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: the legs' results: %w", err)
	}
	return out, nil
}
