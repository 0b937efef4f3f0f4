package enforcer

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// RoleEnv is the environment variable that makes a re-executed lockstep (or
// test binary) play the restricted child; ChildRole is its value. The child
// removes it before it executes the command.
const (
	RoleEnv   = "LOCKSTEP_ROLE"
	ChildRole = "enforcer-child"
)

// Options is one command to run under a policy. The zero value of each field
// is documented beside it.
type Options struct {
	// Policy is what the command may do; nil grants nothing.
	Policy *policy.Policy
	// Command is the argv; Command[0] is looked up in the PATH of Env
	// when it has no slash. Required.
	Command []string
	// LogSubprocesses sets LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so the
	// kernel audits denials after the exec (ABI 7+; refused below).
	LogSubprocesses bool
	// Dir is the command's working directory; "" keeps the caller's. It
	// need not be granted by the policy (changing directory is not an
	// operation Landlock restricts).
	Dir string
	// Env is the command's environment, as given; nil means the caller's
	// variables that SafeEnvName lets pass (CommandEnv(os.Environ(),
	// nil)): no token, key, agent socket or LD_PRELOAD of the caller
	// reaches the command unless put here on purpose.
	Env []string
	// Stdin, Stdout, Stderr are the command's streams; nil means
	// /dev/null for Stdin and the caller's os.Stdout/os.Stderr.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Hash is the policy hash shown on the status line and compared with
	// ExpectHash; "" means Policy.Hash().
	Hash string
	// ExpectHash, when set, must equal Hash, or nothing runs
	// (ErrHashMismatch, exit 125).
	ExpectHash string
	// Self is the executable re-executed as the restricted child when
	// rlimits or cgroups are needed; any binary importing this package
	// qualifies (its init dispatches RoleEnv=ChildRole to ChildMain). ""
	// means os.Executable().
	Self string
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL when the timeout passes; 0 means 2 s.
	KillGrace time.Duration
	// Quiet leaves out the status line.
	Quiet bool
	// RequireABI, when above the running kernel's Landlock ABI, refuses
	// the run (exit 125): a caller that needs what an older ABI leaves
	// unrestricted (landlock.Gaps) says so here. 0 requires nothing.
	RequireABI int
	// Without names isolation layers (Layers) the command does without;
	// nil means every layer. The status line names them (without=).
	// The observer and the pruner run with MeasureWithout.
	Without []string
	// RequireIsolation refuses the run (exit 125) when a layer not
	// switched off cannot be had here, naming it and why; otherwise the
	// status line names it (unisolated=) and the command runs without it.
	RequireIsolation bool
}

// childSpec is what the parent hands the child over fd 3.
type childSpec struct {
	Ruleset *Ruleset  `json:"ruleset"`
	Command []string  `json:"command"`
	Env     []string  `json:"env"`
	Dir     string    `json:"dir,omitempty"`
	Rlimits []rlimitV `json:"rlimits,omitempty"`
	Cgroups []string  `json:"cgroups,omitempty"`
	// Caps are cgroup files the child writes once its Go runtime's
	// threads are up and before it restricts itself (pids.max of a v2
	// cgroup the child was born in: see caps.pidsMax).
	Caps   map[string]string `json:"caps,omitempty"`
	Status string            `json:"status,omitempty"`
	// Setsid: the child starts a session of its own before it execs
	// (see startReexec).
	Setsid bool `json:"setsid,omitempty"`
	// DefaultSignals: the child was started by the shell init, as an
	// asynchronous command, with SIGINT and SIGQUIT ignored; the command
	// gets them at their defaults, as it would from lockstep.
	DefaultSignals bool `json:"default_signals,omitempty"`
	// Isolate is what the child sets up in its namespaces before it
	// restricts itself (nil: no layer).
	Isolate *isolateSpec `json:"isolate,omitempty"`
}

type rlimitV struct {
	Name     string `json:"name"`
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// childReport is what the child writes to fd 4 when it fails before exec.
type childReport struct {
	Status int    `json:"status"`
	Msg    string `json:"msg"`
}

// Run runs opts.Command under opts.Policy and returns the exit status a
// caller should exit with, and an error saying why when that status is the
// enforcer's own (124 timeout, 125 refused, 126 cannot execute, 127 not
// found, 137 cap passed). A command's own status comes back with a nil error
// (killed by a signal: 128+signal).
//
// The caller is never restricted: a re-executed child (Options.Self with
// RoleEnv=ChildRole), cloned into its v2 cgroup (or joining v1 ones), writes
// the process cap, sets the rlimits, restricts itself
// and executes the command in a new process group. When the command ends,
// anything it left in its process group or cgroup is killed.
func Run(ctx context.Context, opts Options) (int, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return StatusRefused, errorf(ErrRefused, "no command given")
	}
	prep, err := Prepare(opts)
	if err != nil {
		return Status(err), err
	}
	// The reaper removes the cgroups should this process die without
	// doing it (SIGKILL); deferred first, it is told last that all is done.
	rp := &reaper{self: selfPath(opts)}
	defer rp.close()
	cg := setupCaps(prep.nproc, prep.memMB, rp)
	cgDesc := ""
	if cg != nil {
		cgDesc = cg.desc
	}
	if !cg.ok() && !noContainment {
		cg.remove()
		cg = setupContainment(rp)
	}
	defer cg.remove()
	env := opts.Env
	if env == nil {
		env = CommandEnv(os.Environ(), nil)
	}
	spec := childSpec{
		Ruleset: prep.Ruleset,
		Command: opts.Command,
		Env:     withoutRole(env),
		Dir:     opts.Dir,
		Rlimits: prep.rlimits,
	}
	if cg.ok() {
		spec.Cgroups = cg.dirs
	}
	if !opts.Quiet {
		spec.Status = prep.StatusLine(cgDesc)
	}
	iso := planIsolation(prep.off, prep.Ruleset, opts.RequireIsolation)
	if len(iso.on) > 0 {
		spec.Dir = cleanDir(opts.Dir)
	}
	status, err := startChild(ctx, opts, prep, cg, &spec, iso)
	switch rerr := rp.failed(); {
	case rerr == nil:
	case err == nil:
		return StatusRefused, errorf(ErrRefused, "%v (the command's status: %d)", rerr, status)
	default:
		err = fmt.Errorf("%w; and %v", err, rerr)
	}
	return status, err
}
