package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// ObservationSchema is the version of an Observation document.
const ObservationSchema = 1

// DefaultWait is how long an observed run waits for its audit records when
// its options name no wait.
const DefaultWait = 30 * time.Second

// Observation is what one kernel did with the command under the policy, as
// one observed run (ObserveHere, Observe) showed it: the document repro
// compares across kernels and verify's diagnosis carries.
type Observation struct {
	Schema int `json:"schema"`
	// Kernel is the kernel as named ("host", a pin, a bzImage path);
	// Release is what uname -r said where the command ran.
	Kernel  string `json:"kernel"`
	Release string `json:"release"`
	// ABI is the running kernel's Landlock ABI.
	ABI int `json:"abi"`
	// Audit is true when Landlock audit records were collected;
	// AuditReason says why not otherwise.
	Audit       bool   `json:"audit"`
	AuditReason string `json:"audit_reason,omitempty"`
	// Status is the exit status of `lockstep run` (the command's, or 125
	// when the policy was refused).
	Status int `json:"status"`
	// Unenforceable lists the rules this kernel could not enforce (exit
	// 125): nothing ran.
	Unenforceable []Rule `json:"unenforceable"`
	// Refusals are the Landlock refusals strace saw, in trace order.
	Refusals []Refusal `json:"refusals"`
	// AuditOnly are denial records no strace refusal took.
	AuditOnly []string `json:"audit_only"`
	// AuditRecords counts the run's Landlock denial records.
	AuditRecords int `json:"audit_records"`
	// Indeterminate says why this side could not be observed ("" when it
	// was).
	Indeterminate string `json:"indeterminate,omitempty"`
	// Stderr is the tail of the enforcer's and the command's stderr.
	Stderr []string `json:"stderr"`
	// Seconds is the observed run's wall time.
	Seconds float64 `json:"seconds"`
}

// Rule is one policy rule a kernel could not enforce.
type Rule struct {
	// Rule is the row with its section: "[bind] allow 5000 udp".
	Rule string `json:"rule"`
	// NeedABI is the first Landlock ABI that enforces it.
	NeedABI int    `json:"need_abi"`
	Why     string `json:"why,omitempty"`
}

// String words the rule and the ABI it needs.
func (r Rule) String() string {
	return fmt.Sprintf("%s (needs Landlock ABI %d)", r.Rule, r.NeedABI)
}

// Refusal is one call Landlock refused.
type Refusal struct {
	// Call is the system call, Op the operation (read, bind, …), Layer
	// "filesystem" or "network".
	Call  string `json:"call"`
	Op    string `json:"op"`
	Layer string `json:"layer"`
	// Objects are the paths, or "<port>/<transport>" for network rules.
	Objects []string `json:"objects"`
	// Rights are the rights refused, as Landlock's audit names them.
	Rights []string `json:"rights"`
	Errno  string   `json:"errno"`
	// Line is the strace line (1-based Number in the trace).
	Line   string `json:"line"`
	Number int    `json:"number"`
	// Grant lists the policy rows that would grant the call.
	Grant []string `json:"grant"`
	// Audit are the denial records joined with this refusal (empty when
	// the kernel logged none, or does not log).
	Audit []string `json:"audit"`
}

// GrantRows renders p as one "[section] row" line per rule.
func GrantRows(p *policy.Policy) []string {
	rows := []string{}
	section := ""
	for _, l := range strings.Split(string(p.Render()), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l
		default:
			rows = append(rows, section+" "+l)
		}
	}
	return rows
}

// ReadObservation reads an Observation document and checks its schema.
func ReadObservation(path string) (*Observation, error) {
	b, err := safefile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	return ParseObservation(path, b)
}

// ParseObservation decodes an Observation document (name is for errors)
// and checks its schema.
func ParseObservation(name string, b []byte) (*Observation, error) {
	var o Observation
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if o.Schema != ObservationSchema {
		return nil, fmt.Errorf("read %s: schema %d, want %d", name, o.Schema, ObservationSchema)
	}
	return &o, nil
}

// Normalise gives nil slices their empty JSON form.
func (o *Observation) Normalise() {
	if o.Unenforceable == nil {
		o.Unenforceable = []Rule{}
	}
	if o.Refusals == nil {
		o.Refusals = []Refusal{}
	}
	if o.AuditOnly == nil {
		o.AuditOnly = []string{}
	}
	if o.Stderr == nil {
		o.Stderr = []string{}
	}
	for i := range o.Refusals {
		r := &o.Refusals[i]
		for _, s := range []*[]string{&r.Objects, &r.Rights, &r.Grant, &r.Audit} {
			if *s == nil {
				*s = []string{}
			}
		}
	}
}
