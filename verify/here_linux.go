//go:build linux

package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/machine"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/contain"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/verdict"
	"github.com/lockstep-sandbox/lockstep/repro"
)

// HereOptions configures Here, one cell on the running kernel.
type HereOptions struct {
	// Kernel names the kernel in the cell.
	Kernel string
	Policy *policy.Policy
	// Exercises is the testing root; Key and Exercise select one exercise.
	Exercises, Key, Exercise string
	// JointRuns: 0 is DefaultJointRuns.
	JointRuns int
	// Exe is the lockstep binary (`run`, the probes); "" is this executable.
	Exe string
	// WorkDir is the exercise's working directory; "" is
	// exercise.DefaultWorkDir.
	WorkDir string
	// RunTimeout bounds each run; 0 is the exercise package's default.
	RunTimeout time.Duration
	// Progress receives one line per step; nil discards.
	Progress func(format string, args ...any)
	Log      *slog.Logger
}

// Here verifies one exercise on the running kernel. The error is for
// failures to start at all; the outcome is in the cell.
func Here(ctx context.Context, opts HereOptions) (*Cell, error) {
	t0 := time.Now()
	if opts.JointRuns == 0 {
		opts.JointRuns = DefaultJointRuns
	}
	if opts.WorkDir == "" {
		opts.WorkDir = exercise.DefaultWorkDir
	}
	if opts.Progress == nil {
		opts.Progress = func(string, ...any) {}
	}
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		opts.Exe = exe
	}
	abi, err := enforcer.HostABI()
	if err != nil {
		return nil, fmt.Errorf("verify: Landlock ABI of the running kernel: %w", err)
	}
	c := &Cell{Schema: CellSchema, Kernel: opts.Kernel, Exercise: opts.Exercise, ABI: abi, Release: machine.Release()}
	defer func() { c.Seconds = time.Since(t0).Seconds(); c.normalise() }()
	ex, err := find(opts.Exercises, opts.Key, opts.Exercise)
	if err != nil {
		return nil, err
	}
	row, _ := enforcer.Row(abi)
	for _, u := range enforcer.CheckEnforceable(opts.Policy, row) {
		c.Unenforceable = append(c.Unenforceable, repro.Rule{Rule: u.Rule, NeedABI: u.NeedABI, Why: u.Why})
	}
	if len(c.Unenforceable) > 0 {
		c.Verdict, c.Why = Fail, fmt.Sprintf("this kernel (Landlock ABI %d) cannot enforce %d rule(s) of the policy: %s", abi, len(c.Unenforceable), c.Unenforceable[0])
		return c, nil
	}
	run := func(prefix []string) (*exercise.Result, error) {
		return ex.Run(ctx, exercise.RunOptions{WorkDir: opts.WorkDir, Prefix: prefix, Timeout: opts.RunTimeout, Log: opts.Log})
	}
	opts.Progress("%s: reference run", ex.Name)
	ref, err := run(nil)
	if err != nil {
		return nil, fmt.Errorf("verify: reference run: %w", err)
	}
	c.Reference = oneLine(ref.Verdict)
	if prob := ref.Verdict.ReferenceProblem(); prob != nil {
		c.Verdict, c.Why = Indeterminate, fmt.Sprintf("the reference run is no reference: %v", prob)
		return c, nil
	}
	scratch, err := os.MkdirTemp("", "lockstep-verify.")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer os.RemoveAll(scratch)
	cfg := filepath.Join(scratch, "policy.cfg")
	if err := os.WriteFile(cfg, opts.Policy.Render(), 0o644); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	held := true
	for i := 1; i <= opts.JointRuns; i++ {
		opts.Progress("%s: joint run %d/%d", ex.Name, i, opts.JointRuns)
		res, err := run([]string{opts.Exe, "run", "-q", "--config", cfg, "--"})
		if err != nil {
			return nil, fmt.Errorf("verify: joint run: %w", err)
		}
		agrees := res.Started && res.Verdict.Same(ref.Verdict)
		c.Joint = append(c.Joint, JointRun{Verdict: oneLine(res.Verdict), Status: res.Status, Agrees: agrees, Seconds: res.Duration.Seconds()})
		held = held && agrees
	}
	if !held {
		opts.Progress("%s: a joint run disagreed with the reference: diagnosis run (strace + audit where offered)", ex.Name)
		obs, err := repro.ObserveRun(ctx, repro.HereOptions{Kernel: opts.Kernel, Policy: opts.Policy, Exe: opts.Exe, Log: opts.Log},
			func(ctx context.Context, prefix []string) (int, string, error) {
				res, err := run(prefix)
				if err != nil {
					return 0, "", err
				}
				return res.Status, string(res.Log), nil
			})
		if err != nil {
			return nil, fmt.Errorf("verify: diagnosis run: %w", err)
		}
		c.Diagnosis = obs
		c.Verdict, c.Why = Fail, failWhy(obs)
		if obs.Indeterminate != "" && len(obs.Refusals) == 0 {
			c.Verdict, c.Why = Indeterminate, "the joint runs disagreed with the reference and the diagnosis run was not observed: "+obs.Indeterminate
		}
		return c, nil
	}
	opts.Progress("%s: containment checks", ex.Name)
	c.Containment, err = containment(ctx, opts.Policy, opts.Exe)
	if err != nil {
		return nil, fmt.Errorf("verify: containment: %w", err)
	}
	c.Verdict = Pass
	for _, ch := range c.Containment {
		if !ch.Held && !ch.Skipped {
			c.Verdict, c.Why = Fail, fmt.Sprintf("the containment check %s did not hold: %s", ch.Name, ch.Detail)
			break
		}
	}
	return c, nil
}

func failWhy(obs *repro.Observation) string {
	if len(obs.Refusals) == 0 {
		return fmt.Sprintf("the joint runs disagreed with the reference, and the diagnosis run (status %d) saw no Landlock refusal", obs.Status)
	}
	var calls []string
	for _, r := range obs.Refusals {
		calls = append(calls, fmt.Sprintf("%s %s (%s)", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ",")))
	}
	return fmt.Sprintf("the joint runs disagreed with the reference; refused: %s", strings.Join(calls, "; "))
}

func find(root, key, name string) (*exercise.Exercise, error) {
	found, err := exercise.ForKey(root, key)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	for _, f := range found {
		if f.Name == name {
			return exercise.Read(f)
		}
	}
	return nil, fmt.Errorf("verify: no exercise %q for key %q under %s", name, key, root)
}

func oneLine(v verdict.Verdict) string {
	pass, fail := 0, 0
	for _, t := range v.Tests {
		if strings.EqualFold(string(t.Outcome), "pass") || strings.EqualFold(string(t.Outcome), "passed") {
			pass++
		} else {
			fail++
		}
	}
	return fmt.Sprintf("%s, %d test(s): %d passed, %d not", v.ExitClass, len(v.Tests), pass, fail)
}

// containment runs the containment probes under p: a canary outside every grant
// stays unreadable, and a listening TCP port no rule names stays
// unreachable.
func containment(ctx context.Context, p *policy.Policy, exe string) ([]Check, error) {
	pp := contain.WithProbe(p, exe)
	var checks []Check
	canary, cleanup, err := makeCanary(p)
	if err != nil {
		checks = append(checks, Check{Name: "canary", Skipped: true, Detail: err.Error()})
	} else {
		defer cleanup()
		checks = append(checks, probe(ctx, pp, exe, "canary", "read", canary))
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	named := false
	for _, r := range p.Connect {
		named = named || r.Port == port || r.Port == 0
	}
	if named {
		checks = append(checks, Check{Name: "connect", Skipped: true, Detail: fmt.Sprintf("the policy may allow a TCP connect to port %d", port)})
	} else {
		checks = append(checks, probe(ctx, pp, exe, "connect", "connect", "127.0.0.1:"+strconv.Itoa(port)))
	}
	return checks, nil
}

// probe runs `lockstep contain-probe <op> <arg>` under pp: the check holds
// when the probe says the operation was refused (status 1, an OP line with
// an errno).
func probe(ctx context.Context, pp *policy.Policy, exe, name, op, arg string) Check {
	var out bytes.Buffer
	status, err := enforcer.Run(ctx, enforcer.Options{Policy: pp, Command: []string{exe, contain.Verb, op, arg},
		Dir: "/", Stdout: &out, Stderr: &out, Quiet: true, Self: exe})
	po := contain.ParseOutput(out.Bytes())
	c := Check{Name: name, Held: err == nil && status == 1 && po.Started && po.Errno != "" && po.Errno != "0",
		Detail: fmt.Sprintf("%s %s: status %d: %s", op, arg, status, strings.TrimSpace(strings.ReplaceAll(out.String(), "\n", "; ")))}
	if err != nil {
		c.Detail += ": " + err.Error()
	}
	return c
}

func makeCanary(p *policy.Policy) (string, func(), error) {
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return "", nil, err
	}
	for _, base := range []string{"/var/tmp", "/tmp", "/root", "/srv", "/"} {
		dir := filepath.Join(base, "lockstep-canary-"+hex.EncodeToString(tok[:]))
		if covered(p, dir) {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		f := filepath.Join(dir, "canary")
		if err := os.WriteFile(f, []byte("canary\n"), 0o644); err != nil {
			os.RemoveAll(dir)
			continue
		}
		return f, func() { os.RemoveAll(dir) }, nil
	}
	return "", nil, errors.New("every writable place for a canary is covered by a grant")
}

func covered(p *policy.Policy, path string) bool {
	for g := range p.FS {
		if g == "/" || g == path || strings.HasPrefix(path, g+"/") {
			return true
		}
	}
	return false
}
