package recorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// CheckRole is the registered role of check's guest side.
const CheckRole = "record-check-guest"

// CheckFile is the result the guest side writes.
const CheckFile = "check.json"

// CheckGuestOptions configure CheckHere; as JSON they are the guest's job.
type CheckGuestOptions struct {
	Command  []string `json:"command"`
	Exercise string   `json:"exercise,omitempty"`
	Script   string   `json:"script"`
	// Policy is the policy's text.
	Policy string `json:"policy"`
	// Start is the recorded starting state the replay must begin from; the
	// guest's root digest is RootDigest, taken by the host.
	Start      StartState `json:"start"`
	RootDigest string     `json:"root_digest"`
	// Recorded are the objects the recorded sessions' calls succeeded on
	// (paths, and "<port>/<transport>" for network rules).
	Recorded []string `json:"recorded"`
	Out      string   `json:"out"`
}

// CheckResult is check.json: the replay under the policy.
type CheckResult struct {
	// Status is StatusOK or StatusFail; Why says why it failed.
	Status int      `json:"status"`
	Why    []string `json:"why"`
	// Regressions are the refusals of calls that succeeded while
	// recording: call, objects, rights and the audit records.
	Regressions []engine.Refusal `json:"regressions"`
	// Others are refusals of objects no recorded call succeeded on.
	Others []engine.Refusal `json:"others"`
	// Unchecked says what this kernel cannot check (rules above its
	// Landlock ABI, no audit records below ABI 7).
	Unchecked   []string            `json:"unchecked"`
	Observation *engine.Observation `json:"observation,omitempty"`
	ScriptError string              `json:"script_error,omitempty"`
}

// CheckOptions configure Check.
type CheckOptions struct {
	// RunOptions are the replayed session's, as Run takes them (the
	// recording, exercise, script, command, kernel, sizing and output).
	RunOptions
	// PolicyFile is the policy to replay under ("" the recording's
	// generated policy.cfg).
	PolicyFile string
}

// Check replays the scripted session in a fresh guest under the policy
// with the audit observer, and fails on every call that succeeded while
// recording and is now refused.
func Check(ctx context.Context, opts CheckOptions) (*CheckResult, *harness.Result, error) {
	gopts, err := checkInputs(opts)
	if err != nil {
		return nil, nil, err
	}
	results, err := os.MkdirTemp("", "lockstep-record-check.")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(results)
	if gopts.RootDigest, err = rootdigest.Of(rootdigest.RootOr(opts.Root)); err != nil {
		return nil, nil, err
	}
	hopts := harness.Options{Kernel: opts.Kernel, Stdout: opts.Stderr, Stderr: opts.Stderr, ResultsDir: results,
		ForensicsDir: harness.TempForensicsDir(results), Verbose: opts.Verbose, Log: opts.Log}
	opts.Sizing.Apply(&hopts)
	if opts.Exercise != "" {
		abs, err := filepath.Abs(opts.Exercise)
		if err != nil {
			return nil, nil, err
		}
		hopts.Shares = []harness.Share{{Source: abs, GuestPath: guestExercise}}
		gopts.Exercise = guestExercise
	}
	if err := hopts.SetRole(CheckRole, gopts); err != nil {
		return nil, nil, err
	}
	g, err := harness.Run(ctx, hopts)
	if g == nil {
		return nil, nil, fmt.Errorf("record check: %w", err)
	}
	if err != nil {
		return nil, g, err
	}
	var res CheckResult
	b, rerr := safefile.ReadFile(filepath.Join(results, CheckFile), 0)
	if rerr == nil {
		rerr = unmarshal(b, &res)
	}
	if rerr != nil || g.Status != 0 {
		return nil, g, fmt.Errorf("%w: the guest exited %d without a check (%v)", harness.ErrIndeterminate, g.Status, rerr)
	}
	return &res, g, nil
}

// checkInputs reads the recording, its policy and its first session's
// starting state into the guest's options.
func checkInputs(opts CheckOptions) (CheckGuestOptions, error) {
	if err := CheckCommand(opts.Command); err != nil {
		return CheckGuestOptions{}, err
	}
	if _, err := ParseScript(strings.NewReader(opts.Script)); err != nil {
		return CheckGuestOptions{}, err
	}
	file := opts.PolicyFile
	if file == "" {
		file = filepath.Join(opts.Recording, PolicyFile)
	}
	text, err := policy.ReadFile(file)
	if err != nil {
		return CheckGuestOptions{}, err
	}
	if _, err := policy.Parse(file, text); err != nil {
		return CheckGuestOptions{}, err
	}
	sessions, err := Sessions(opts.Recording)
	if err != nil {
		return CheckGuestOptions{}, err
	}
	g := CheckGuestOptions{Command: opts.Command, Script: opts.Script, Policy: string(text), Start: sessions[0].Record.Start, Out: proto.ResultsDir}
	seen := map[string]bool{}
	for _, s := range sessions {
		for _, o := range recordedObjects(s.Record.Uses) {
			if !seen[o] {
				seen[o] = true
				g.Recorded = append(g.Recorded, o)
			}
		}
	}
	return g, nil
}

// recordedObjects are the objects of the grantable uses, named as the
// observer names a refusal's objects.
func recordedObjects(uses []Use) []string {
	var out []string
	for _, u := range uses {
		if !u.grantable() {
			continue
		}
		out = append(out, u.Objects()...)
		for _, n := range u.Net {
			out = append(out, strconv.Itoa(n.Port)+"/"+n.Transport)
		}
	}
	return out
}

// ErrStartDiffers is a guest that did not start in the recorded state.
var ErrStartDiffers = errors.New("the replay's starting state is not the recorded one")
