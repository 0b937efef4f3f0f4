package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
)

func init() {
	hiddenRoles[enforcer.ChildRole] = enforcer.ChildMain
	register(&verb{
		Name:  "run",
		Usage: "run --config <file>… [--base-dir <dir>] [--expect-hash sha256:<hex>] [--log-subprocesses] [-q] -- <cmd>…",
		Short: "run one command under a policy with this kernel's Landlock",
		Long: `Combines every Base*.cfg of --base-dir (sorted) and each --config in order,
checks that this kernel's Landlock ABI can enforce every rule, and runs the
command in a restricted child: every right the ABI knows is handled, so what
the policy does not grant is refused (EACCES). [limits] become rlimits, a
cgroup cap (nproc, mem_mb) and a timeout that kills the process group.

One status line goes to stderr before the command starts:
  lockstep: OK abi=7 handled=fs,net,scope rules=12 net=tcp-ports hash=sha256:…

Exit status: the command's own (128+n when killed by signal n); 124 the
timeout passed; 125 refused before anything ran (bad policy, a rule this
kernel cannot enforce — the rule and the ABI it needs are named — or an
--expect-hash mismatch); 126 cannot execute; 127 not found; 130 interrupted;
137 a cap was passed. With -v (lockstep -v run …) every rule of the ruleset
is printed first. See docs/run.md.`,
		Example: `# run cat under a policy: what it grants works, anything else is EACCES
$ lockstep run --config policy.cfg -- cat /etc/hostname
# only if the policy is exactly the one reviewed
$ lockstep run --base-dir /etc/lockstep --config ex.cfg --expect-hash sha256:3b1f… -- python3 -m pytest`,
		Flags: runFlags,
	})
}

// runArgs are run's flags.
type runArgs struct {
	configs       multiFlag
	baseDir       *string
	expect        *string
	logSub, quiet *bool
}

// runFlags declares run's flags on fs and returns the verb.
func runFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	a := &runArgs{}
	fs.Var(&a.configs, "config", "policy `file` (repeatable; applied after the bases, in order)")
	a.baseDir = strictString(fs, "base-dir", "", "`dir`ectory whose Base*.cfg files are combined first, in sorted order", wantBaseDir)
	a.expect = strictString(fs, "expect-hash", "", "refuse unless the combined policy hashes to this `sha256:<hex>` (lockstep policy hash)", wantHash)
	a.logSub = fs.Bool("log-subprocesses", false, "audit-log Landlock denials after exec too (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, ABI 7+)")
	a.quiet = fs.Bool("q", false, "leave out the status line")
	return a.run
}

// run loads the policy and runs the command under it.
func (a *runArgs) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["run"]
	if len(args) == 0 {
		return usageExit(io, v, usagef("no command given after --"))
	}
	if len(a.configs) == 0 && *a.baseDir == "" {
		return usageExit(io, v, usagef("no policy: give --config <file> or --base-dir <dir>"))
	}
	p, err := policy.Load(*a.baseDir, a.configs)
	if err != nil {
		return runPolicyRefused(io, err)
	}
	opts := enforcer.Options{
		Policy:          p,
		Command:         args,
		LogSubprocesses: *a.logSub,
		ExpectHash:      *a.expect,
		Stdin:           io.in,
		Stdout:          io.out,
		Stderr:          io.err,
		Quiet:           *a.quiet,
	}
	if io.verbose {
		// The ruleset as the kernel will get it; Run prepares it again.
		if prep, err := enforcer.Prepare(opts); err == nil {
			for _, l := range append(prep.Ruleset.Describe(), wide.Links(p)...) {
				fmt.Fprintf(io.err, "lockstep run: %s\n", l)
			}
		}
	}
	status, err := enforcer.Run(ctx, opts)
	if err != nil {
		var ue *enforcer.UnenforceableError
		if errors.As(err, &ue) {
			for _, pr := range ue.Problems {
				fmt.Fprintf(io.err, "lockstep run: unenforceable: %s\n", pr)
			}
			fmt.Fprintln(io.err, "lockstep run: refused. Nothing ran.")
			return status
		}
		return fail(io, "run", status, err)
	}
	return status
}

// runPolicyRefused reports a policy that did not load, every problem on a
// line of its own, and returns the refusal's status.
func runPolicyRefused(io *stdio, err error) int {
	var el policy.ErrorList
	if errors.As(err, &el) {
		for _, e := range el {
			fmt.Fprintf(io.err, "lockstep run: %v\n", e)
		}
		fmt.Fprintf(io.err, "lockstep run: %d policy problems. Nothing ran.\n", len(el))
		return exitRefused
	}
	return fail(io, "run", exitRefused, fmt.Errorf("%w. Nothing ran", err))
}
