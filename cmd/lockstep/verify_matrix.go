package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// runMatrix is --plan and --summarise, the kernel-matrix workflow's plan
// and summary jobs (docs/ci.md), over one selection: the bases of
// --base-dir (--key keeps some) × the pins --kernel names (default: every
// pin of the table, pin files' included). --plan prints the plan as one line of JSON; --summarise
// DIR fills its bases × kernels table from the legs' `verify --base-dir
// --json` documents under DIR and prints it as Markdown (--json: the table
// as a document; --html: the report page).
func (a *verifyArgs) runMatrix(io *cli.Stdio) int {
	v := verbs["verify"]
	switch {
	case *a.plan && *a.summarise != "":
		return cli.UsageExit(io, v, cli.Usagef("--plan and --summarise are two steps of the matrix: give one"))
	case *a.baseDir == "":
		return cli.UsageExit(io, v, cli.Usagef("--plan and --summarise plan the bases of --base-dir: give it"))
	case *a.base != "" || len(a.only) > 0:
		return cli.UsageExit(io, v, cli.Usagef("--plan and --summarise take every exercise of each base of --base-dir: --base and --exercise do not go with them"))
	case *a.plan && *a.html != "":
		return cli.UsageExit(io, v, cli.Usagef("--html is the table of --summarise, not of --plan"))
	}
	if *a.exercises == "" {
		*a.exercises = referenceExercises
	}
	plan, err := a.matrixPlan()
	if err != nil {
		return cli.UsageExit(io, v, err)
	}
	if *a.plan {
		b, err := json.Marshal(plan)
		if err != nil {
			return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
		}
		fmt.Fprintln(io.Out, string(b))
		return cli.ExitOK
	}
	results, err := verify.ReadLegResults(*a.summarise)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitUsage, err)
	}
	m, err := verify.NewMatrix(plan, results)
	if err != nil {
		return cli.Fail(io, "verify", cli.ExitUsage, err)
	}
	if err := report.WriteFile(*a.html, func() ([]byte, error) {
		return report.VerifyMatrix(m, report.Meta{Title: "lockstep kernel matrix: " + *a.baseDir, Started: time.Now()})
	}); err != nil {
		return cli.Fail(io, "verify", cli.ExitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "verify", m, m.Status, cli.ExitIndeterminate)
	}
	fmt.Fprint(io.Out, m.Markdown())
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
			return nil, cli.Usagef("--kernel %s: a leg provides its kernel by pin (%v)", k, err)
		}
	}
	return verify.NewPlan(verify.SortedKeys(sets), kernels)
}
