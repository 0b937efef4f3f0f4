package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func init() {
	envRoles[enforcer.ChildRole] = enforcer.ChildMain
	envRoles[enforcer.InitRole] = enforcer.InitMain
	verbs.Register(&cli.Verb{
		Name:    enforcer.Verb,
		Usage:   "run --config <file>… [--base-dir <dir>] [--expect-hash sha256:<hex>] [--require-abi <n>] [--env NAME[=VALUE]]… [--env-file <file>]… [--log-subprocesses] [--without <layer,…>] [--require-isolation] [--exec] [-q] -- <cmd>…",
		Short:   "run one command under a policy with this kernel's Landlock",
		Long:    help("run", runHelp()),
		Example: example("run"),
		Flags:   runFlags,
	})
}

func runFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	var configs cli.MultiFlag
	fs.Var(&configs, "config", "policy `file` (repeatable; applied after the bases, in order)")
	baseDir := cli.StrictString(fs, "base-dir", "", "`dir`ectory whose Base*.cfg files are combined first, in sorted order", wantBaseDir)
	expect := cli.StrictString(fs, "expect-hash", "", "refuse unless the combined policy hashes to this `sha256:<hex>` (lockstep policy hash)", wantHash)
	logSub := fs.Bool("log-subprocesses", false, fmt.Sprintf("audit-log Landlock denials after exec too (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, ABI %d+)", landlock.ABIAuditRecords))
	quiet := fs.Bool("q", false, "leave out the status line")
	inPlace := fs.Bool("exec", false, "become the command (execve in place): faster, but what it leaves running is not killed and a signal ends it as a signal; refused with [limits] timeout, nproc or mem_mb")
	requireABI := fs.Int("require-abi", 0, "refuse (125) on a kernel whose Landlock ABI is below `n`")
	var without layersFlag
	fs.Var(&without, "without", "switch off isolation `layer`s, comma-separated: "+strings.Join(enforcer.LayerNames(), ", ")+" (repeatable)")
	requireIso := fs.Bool("require-isolation", false, "refuse (125) when an isolation layer not switched off cannot be had here")
	var envs, envFiles cli.MultiFlag
	fs.Var(&envs, "env", "pass the caller's `NAME`, or set NAME=VALUE, in the command's environment (repeatable)")
	fs.Var(&envFiles, "env-file", "read NAME and NAME=VALUE lines as --env takes them from `file` (repeatable; --env wins)")
	return func(ctx context.Context, io *cli.Stdio, args []string) int {
		v := verbs["run"]
		if len(args) == 0 {
			return cli.UsageExit(io, v, cli.Usagef("no command given after --"))
		}
		if len(configs) == 0 && *baseDir == "" {
			return cli.UsageExit(io, v, cli.Usagef("no policy: give --config <file> or --base-dir <dir>"))
		}
		if *requireABI < 0 {
			return cli.UsageExit(io, v, cli.Usagef("--require-abi %d: want an ABI version, 1 or more", *requireABI))
		}
		rules, err := enforcer.ParseEnvRules(envs)
		if err != nil {
			return cli.UsageExit(io, v, err)
		}
		fileRules, err := enforcer.ReadEnvFiles(envFiles)
		if err != nil {
			return cli.Fail(io, "run", cli.ExitRefused, fmt.Errorf("%w. Nothing ran", err))
		}
		env := enforcer.CommandEnv(os.Environ(), append(fileRules, rules...))
		p, err := policy.Load(*baseDir, configs)
		if err != nil {
			if !errors.As(err, new(policy.ErrorList)) {
				err = fmt.Errorf("%w. Nothing ran", err)
			}
			enforcer.WriteRefusal(io.Err, err)
			return cli.ExitRefused
		}
		return runCommand(ctx, io, enforcer.Options{Policy: p, Command: args, LogSubprocesses: *logSub, ExpectHash: *expect,
			RequireABI: *requireABI, Env: env, Stdin: io.In, Stdout: io.Out, Stderr: io.Err, Quiet: *quiet,
			Without: without, RequireIsolation: *requireIso}, *inPlace)
	}
}

// runCommand runs the command under the policy (enforcer.Run), first
// printing the ruleset and the environment with -v; lockstep's own signals
// kill the command and exit 128+n. With inPlace (--exec) lockstep becomes
// the command (enforcer.Exec) and returns only when nothing ran.
func runCommand(ctx context.Context, io *cli.Stdio, opts enforcer.Options, inPlace bool) int {
	if io.Verbose {
		// The ruleset as the kernel will get it; Run prepares it again.
		if prep, err := enforcer.Prepare(opts); err == nil {
			for _, l := range append(prep.Ruleset.Describe(), wide.Links(opts.Policy)...) {
				fmt.Fprintf(io.Err, "lockstep run: %s\n", l)
			}
		}
		fmt.Fprintf(io.Err, "lockstep run: environment: %s; left out: %s\n",
			strings.Join(enforcer.EnvNames(opts.Env), ","), strings.Join(enforcer.DroppedEnv(os.Environ(), opts.Env), ","))
	}
	if inPlace {
		return execCommand(ctx, io, opts)
	}
	ctx, stop := cli.NotifyContext(ctx, enforcer.Signals...)
	defer stop()
	status, err := enforcer.Run(ctx, opts)
	var sig cli.Signal
	if errors.Is(err, enforcer.ErrInterrupted) && errors.As(context.Cause(ctx), &sig) {
		return cli.Fail(io, "run", 128+int(sig.Signal), err)
	}
	if err != nil {
		enforcer.WriteRefusal(io.Err, err)
	}
	return status
}

// execCommand is run --exec: lockstep becomes the command. A SIGINT or
// SIGTERM caught before (main's context) ends it with 128+n, nothing run.
func execCommand(ctx context.Context, io *cli.Stdio, opts enforcer.Options) int {
	if ctx.Err() != nil {
		err := fmt.Errorf("%w (%v). Nothing ran", enforcer.ErrInterrupted, context.Cause(ctx))
		return cli.Fail(io, "run", enforcer.StatusInterrupt, err)
	}
	status, err := enforcer.Exec(opts)
	enforcer.WriteRefusal(io.Err, err)
	return status
}

// layersFlag collects --without's layer names.
type layersFlag []string

func (l *layersFlag) String() string { return strings.Join(*l, ",") }

func (l *layersFlag) Set(v string) error {
	names, err := enforcer.ParseLayers(v)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !slices.Contains(*l, n) {
			*l = append(*l, n)
		}
	}
	return nil
}
