package recorder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// CheckHere replays the session on this machine (a guest) under the
// policy with the audit observer (engine.Observe, the observed-run
// engine) and writes check.json to opts.Out.
func CheckHere(ctx context.Context, opts CheckGuestOptions) (*CheckResult, error) {
	sc, err := ParseScript(strings.NewReader(opts.Script))
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse("policy.cfg", []byte(opts.Policy))
	if err != nil {
		return nil, err
	}
	if err := prepareWorkDir(opts.Exercise); err != nil {
		return nil, err
	}
	start, err := listStart(opts.RootDigest)
	if err != nil {
		return nil, err
	}
	if diff := startDiff(opts.Start, *start); diff != "" {
		r := &CheckResult{Status: StatusFail, Why: []string{fmt.Sprintf("refused: %v: %s", ErrStartDiffers, diff)}, Regressions: []engine.Refusal{},
			Others: []engine.Refusal{}, Unchecked: []string{"everything: the replay did not start from the recorded state"}}
		return r, writeCheck(opts.Out, r)
	}
	var scriptErr error
	o, err := engine.Observe(ctx, engine.HereOptions{Kernel: release(), Policy: p}, func(ctx context.Context, prefix []string) (int, string, error) {
		res, err := RunSession(ctx, Session{Argv: append(slices.Clone(prefix), opts.Command...), Dir: WorkDir, Env: sessionEnv(), Script: sc})
		if err != nil {
			return 0, "", err
		}
		scriptErr = res.ScriptErr
		return res.Status, string(res.Transcript), nil
	})
	if err != nil {
		return nil, err
	}
	r := judgeReplay(o, scriptErr, opts.Recorded)
	return r, writeCheck(opts.Out, r)
}

func writeCheck(out string, r *CheckResult) error {
	b, err := marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return safefile.WriteFile(filepath.Join(out, CheckFile), b, 0o644)
}

// judgeReplay fails the replay on each refusal of an object a recorded
// call succeeded on, on a script that did not finish, and on an
// observation that could not be made; it says what the kernel cannot
// check.
func judgeReplay(o *engine.Observation, scriptErr error, recorded []string) *CheckResult {
	r := &CheckResult{Why: []string{}, Regressions: []engine.Refusal{}, Others: []engine.Refusal{}, Unchecked: []string{}, Observation: o}
	for _, f := range o.Refusals {
		if slices.ContainsFunc(f.Objects, func(x string) bool { return slices.Contains(recorded, x) }) {
			r.Regressions = append(r.Regressions, f)
			r.Why = append(r.Why, fmt.Sprintf("refused now, succeeded while recording: %s %s (%s); kernel record: %s",
				f.Call, strings.Join(f.Objects, " "), strings.Join(f.Rights, ","), strings.Join(f.Audit, " | ")))
			continue
		}
		r.Others = append(r.Others, f)
	}
	if scriptErr != nil {
		r.ScriptError = scriptErr.Error()
		r.Why = append(r.Why, "the replay did not run the session to its end: "+scriptErr.Error())
	}
	if o.Indeterminate != "" {
		r.Why = append(r.Why, "the replay could not be observed: "+o.Indeterminate)
	}
	for _, u := range o.Unenforceable {
		r.Unchecked = append(r.Unchecked, "this kernel cannot enforce "+u.String())
		r.Why = append(r.Why, "the enforcer refused the policy on this kernel: "+u.String())
	}
	if !o.Audit {
		r.Unchecked = append(r.Unchecked, "no audit records: "+o.AuditReason)
	}
	if o.ABI < landlock.ABIUDP {
		r.Unchecked = append(r.Unchecked, fmt.Sprintf("Landlock ABI %d: UDP rows (ABI %d) cannot be checked here", o.ABI, landlock.ABIUDP))
	}
	if len(r.Why) > 0 {
		r.Status = StatusFail
	}
	return r
}

// startDiff names how the replay's starting state differs from the
// recorded one ("" it does not).
func startDiff(want, got StartState) string {
	var d []string
	if want.RootDigest != got.RootDigest {
		d = append(d, fmt.Sprintf("the root's digest is %s, recorded %s", got.RootDigest, want.RootDigest))
	}
	if want.ListDigest != got.ListDigest {
		w, g := existedMap(want.Entries), existedMap(got.Entries)
		for p := range g {
			if _, ok := w[p]; !ok {
				d = append(d, "present now, not when recorded: "+p)
			}
		}
		for p := range w {
			if _, ok := g[p]; !ok {
				d = append(d, "recorded, missing now: "+p)
			}
		}
		if len(d) == 0 {
			d = append(d, "the listed entries' kinds differ")
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}
