package verify

import (
	"encoding/json"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// Schema versions of a Cell and a Result.
const (
	CellSchema   = 1
	ResultSchema = 1
)

// CellFile is the file the in-guest side writes into the results.
const CellFile = "verify-cell.json"

// Verdicts of a cell.
const (
	Pass          = "pass"
	Fail          = "fail"
	Indeterminate = "indeterminate"
	// Inconclusive is a cell whose run ran out of time (the policy's
	// timeout) before any run showed a difference: a time-out is no
	// difference between kernels, as the observer judges it. It counts as
	// indeterminate in the status (3).
	Inconclusive = "inconclusive"
)

// Statuses of a verification, as `lockstep verify` exits.
const (
	StatusPass          = 0
	StatusFail          = 1
	StatusIndeterminate = 3
)

// DefaultJointRuns is how many runs under the policy each exercise gets.
const DefaultJointRuns = 2

// jointRuns is the joint-run count n stands for (0: DefaultJointRuns); a
// negative one is refused, since no joint run would leave nothing to
// disagree and every cell a pass.
func jointRuns(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("verify: %d joint runs; want at least 1 (0: the default, %d)", n, DefaultJointRuns)
	case n == 0:
		return DefaultJointRuns, nil
	}
	return n, nil
}

// Cell is one exercise on one kernel.
type Cell struct {
	Schema   int    `json:"schema"`
	Kernel   string `json:"kernel"`
	Exercise string `json:"exercise"`
	// Verdict is Pass, Fail, Indeterminate or Inconclusive; Why says why
	// it is not Pass.
	Verdict string `json:"verdict"`
	Why     string `json:"why,omitempty"`
	// Release and ABI describe the kernel the cell ran on.
	Release string `json:"release"`
	ABI     int    `json:"abi"`
	// Reference is the reference run's verdict in one line; Joint each
	// joint run's, and whether it agreed.
	Reference string     `json:"reference"`
	Joint     []JointRun `json:"joint"`
	// TimeFactor is the factor the policy's timeout and cpu limits were
	// multiplied by for the reference, joint and diagnosis runs (a guest
	// under TCG; HereOptions.TimeFactor); absent: 1.
	TimeFactor int `json:"time_factor,omitempty"`
	// Layers are the policy files this cell combined after the base
	// (HostOptions.Layers that apply to it; set by the host).
	Layers []string `json:"layers,omitempty"`
	// Unenforceable are the rules the kernel could not enforce.
	Unenforceable []engine.Rule `json:"unenforceable"`
	// Diagnosis is the observed run after a joint run disagreed: its
	// refusals (each with its audit records and granting rows).
	Diagnosis *engine.Observation `json:"diagnosis,omitempty"`
	// Containment are the containment checks (after joint verification
	// held).
	Containment []Check `json:"containment"`
	Seconds     float64 `json:"seconds"`
	// Console is the guest console's last lines when the guest did not
	// report.
	Console []string `json:"console,omitempty"`
	// Guest is the guest's provenance and timings (set by the host).
	Guest *harness.GuestInfo `json:"guest,omitempty"`
}

// JointRun is one run under the policy.
type JointRun struct {
	Verdict string `json:"verdict"`
	Status  int    `json:"status"`
	Agrees  bool   `json:"agrees"`
	// TimedOut is a run that ran out of time (the policy's timeout).
	TimedOut bool    `json:"timed_out,omitempty"`
	Seconds  float64 `json:"seconds"`
}

// Check is one containment check.
type Check struct {
	Name    string `json:"name"`
	Held    bool   `json:"held"`
	Skipped bool   `json:"skipped,omitempty"`
	Detail  string `json:"detail"`
}

// KernelInfo names a kernel of the matrix.
type KernelInfo struct {
	Name    string `json:"name"`
	Pin     string `json:"pin,omitempty"`
	BzImage string `json:"bzimage,omitempty"`
	ABI     int    `json:"abi"`
}

// Result is the whole matrix.
type Result struct {
	Schema int `json:"schema"`
	// Status is StatusPass, StatusFail or StatusIndeterminate.
	Status     int          `json:"status"`
	Key        string       `json:"key"`
	PolicyHash string       `json:"policy_hash"`
	Policies   []string     `json:"policies"`
	Kernels    []KernelInfo `json:"kernels"`
	Exercises  []string     `json:"exercises"`
	// Cells are row-major: Cells[k*len(Exercises)+e].
	Cells []*Cell `json:"cells"`
	// WallSeconds is the whole run; GuestSeconds the sum of every guest's
	// own wall time (what running them one after another would take,
	// roughly); Parallel the pool's bound (0: the host's CPUs).
	WallSeconds  float64 `json:"wall_seconds"`
	GuestSeconds float64 `json:"guest_seconds"`
	Parallel     int     `json:"parallel"`
}

// Cell returns the cell of kernel k and exercise e.
func (r *Result) Cell(k, e int) *Cell { return r.Cells[k*len(r.Exercises)+e] }

// status folds the cells: any fail → 1, else any indeterminate or
// inconclusive → 3, else 0.
func status(cells []*Cell) int {
	st := StatusPass
	for _, c := range cells {
		st = WorseStatus(st, verdictStatus(c.Verdict))
	}
	return st
}

// verdictStatus is the status one cell of verdict v alone would give.
func verdictStatus(v string) int {
	switch v {
	case Pass:
		return StatusPass
	case Fail:
		return StatusFail
	}
	return StatusIndeterminate
}

// WorseStatus folds two statuses of verifications: fail over indeterminate
// over pass (the order is not numeric: 1 is worse than 3).
func WorseStatus(a, b int) int {
	if a == StatusFail || b == StatusFail {
		return StatusFail
	}
	return max(a, b)
}

// ReadCell reads a cell document and checks its schema.
func ReadCell(path string) (*Cell, error) {
	b, err := safefile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	var c Cell
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if c.Schema != CellSchema {
		return nil, fmt.Errorf("read %s: schema %d, want %d", path, c.Schema, CellSchema)
	}
	return &c, nil
}

func (c *Cell) normalise() {
	if c.Joint == nil {
		c.Joint = []JointRun{}
	}
	if c.Unenforceable == nil {
		c.Unenforceable = []engine.Rule{}
	}
	if c.Containment == nil {
		c.Containment = []Check{}
	}
}
