package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func init() {
	envRoles[enforcer.ChildRole] = enforcer.ChildMain
	envRoles[enforcer.InitRole] = enforcer.InitMain
	register(&verb{
		Name:  enforcer.Verb,
		Usage: "run --config <file>… [--base-dir <dir>] [--expect-hash sha256:<hex>] [--require-abi <n>] [--env NAME[=VALUE]]… [--env-file <file>]… [--log-subprocesses] [--without <layer,…>] [--require-isolation] [--exec] [-q] -- <cmd>…",
		Short: "run one command under a policy with this kernel's Landlock",
		Long:  runLong,
		Example: `# run cat under a policy: what it grants works, anything else is EACCES
$ lockstep run --config policy.cfg -- cat /etc/hostname
# only if the policy is exactly the one reviewed, on a kernel that restricts UNIX sockets, with one token
$ lockstep run --base-dir /etc/lockstep --config ex.cfg --expect-hash sha256:3b1f… --require-abi 9 --env PYPI_TOKEN -- python3 -m pytest
# refuse to run where a namespace or the read-only mounts cannot be had (not root, no user namespaces)
$ lockstep run --require-isolation --config policy.cfg -- make test
# see Landlock's own EACCES (and its audit records) instead of EROFS outside the writable grants
$ lockstep run --without mounts --config policy.cfg -- touch /etc/x`,
		Flags: runFlags,
	})
}

// runLong is run's help text.
var runLong = `Combines every Base*.cfg of --base-dir (sorted) and each --config in order,
checks that this kernel's Landlock ABI can enforce every rule, and runs the
command in a restricted child: every right the ABI knows is handled, so what
the policy does not grant is refused (EACCES). [limits] become rlimits, a
cgroup cap (nproc, mem_mb) and a timeout that kills the process group.

One status line goes to stderr before the command starts; unrestricted=
names what this kernel's Landlock ABI cannot restrict at all:
  lockstep: OK abi=7 handled=fs,net,scope rules=12 net=tcp-ports hash=sha256:… unrestricted=unix-connect,udp

The command's environment is scrubbed; of the caller's variables only
  ` + strings.Join(enforcer.SafeEnv, " ") + ` LC_*
pass. --env NAME passes one more, --env NAME=VALUE sets one, --env-file
reads such lines (these flags are not part of the policy hash). The command
cannot push input into a terminal (TIOCSTI and TIOCLINUX are refused), and
dies with lockstep.

Isolation layers (namespaces, as root; a user namespace otherwise):
  mounts  every mount read-only but the paths granted [write], [create],
          [create-ipc], [create-symlink], [delete] or [restructure]: chmod,
          chown, xattrs and new files elsewhere fail with EROFS
  pid     a PID namespace and /proc of its own under a small init: no other
          process can be named (prlimit, setpriority, kill), and nothing the
          command starts outlives it
  ipc     System V and POSIX message queue IPC of its own
  uts     a host name of its own
  memfd   vm.memfd_noexec=2: a memfd cannot be executed
--without LAYER[,LAYER] switches layers off (status line: without=); a layer
that cannot be had here is named (unisolated=), or refused (125) with
--require-isolation. The observer and the pruner run --without mounts,pid: on a
read-only mount the kernel says EROFS before Landlock is asked, and no
Landlock denial is logged; in a PID namespace the audit records name
/proc/<pid> with the namespace's pids.

--exec makes lockstep the command (execve in place, no process beside it):
about 1.7 ms faster, but what the command leaves running is not killed, a
command killed by signal n is seen killed (not exit 128+n), and a policy
with [limits] timeout, nproc or mem_mb is refused.

Exit status: the command's own (128+n when killed by signal n); 124 the
timeout passed; 125 refused before anything ran (bad policy, a rule this
kernel cannot enforce — the rule and the ABI it needs are named — an
--expect-hash mismatch, or an ABI below --require-abi); 126 cannot execute;
127 not found; 128+n lockstep got signal n (SIGHUP, SIGINT, SIGQUIT,
SIGTERM) and killed the command; 137 a cap was passed. With -v (lockstep -v
run …) every rule of the ruleset and the environment's names are printed
first. See docs/run.md.`

func runFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	var configs multiFlag
	fs.Var(&configs, "config", "policy `file` (repeatable; applied after the bases, in order)")
	baseDir := strictString(fs, "base-dir", "", "`dir`ectory whose Base*.cfg files are combined first, in sorted order", wantBaseDir)
	expect := strictString(fs, "expect-hash", "", "refuse unless the combined policy hashes to this `sha256:<hex>` (lockstep policy hash)", wantHash)
	logSub := fs.Bool("log-subprocesses", false, fmt.Sprintf("audit-log Landlock denials after exec too (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, ABI %d+)", landlock.ABIAuditRecords))
	quiet := fs.Bool("q", false, "leave out the status line")
	inPlace := fs.Bool("exec", false, "become the command (execve in place): faster, but what it leaves running is not killed and a signal ends it as a signal; refused with [limits] timeout, nproc or mem_mb")
	requireABI := fs.Int("require-abi", 0, "refuse (125) on a kernel whose Landlock ABI is below `n`")
	var without layersFlag
	fs.Var(&without, "without", "switch off isolation `layer`s, comma-separated: "+strings.Join(enforcer.LayerNames(), ", ")+" (repeatable)")
	requireIso := fs.Bool("require-isolation", false, "refuse (125) when an isolation layer not switched off cannot be had here")
	var envs, envFiles multiFlag
	fs.Var(&envs, "env", "pass the caller's `NAME`, or set NAME=VALUE, in the command's environment (repeatable)")
	fs.Var(&envFiles, "env-file", "read NAME and NAME=VALUE lines as --env takes them from `file` (repeatable; --env wins)")
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["run"]
		if len(args) == 0 {
			return usageExit(io, v, usagef("no command given after --"))
		}
		if len(configs) == 0 && *baseDir == "" {
			return usageExit(io, v, usagef("no policy: give --config <file> or --base-dir <dir>"))
		}
		if *requireABI < 0 {
			return usageExit(io, v, usagef("--require-abi %d: want an ABI version, 1 or more", *requireABI))
		}
		rules, err := envRules(envs)
		if err != nil {
			return usageExit(io, v, err)
		}
		fileRules, err := envFileRules(envFiles)
		if err != nil {
			return fail(io, "run", exitRefused, fmt.Errorf("%w. Nothing ran", err))
		}
		env := enforcer.CommandEnv(os.Environ(), append(fileRules, rules...))
		p, err := policy.Load(*baseDir, configs)
		if err != nil {
			if !errors.As(err, new(policy.ErrorList)) {
				err = fmt.Errorf("%w. Nothing ran", err)
			}
			enforcer.WriteRefusal(io.err, err)
			return exitRefused
		}
		return runCommand(ctx, io, enforcer.Options{Policy: p, Command: args, LogSubprocesses: *logSub, ExpectHash: *expect,
			RequireABI: *requireABI, Env: env, Stdin: io.in, Stdout: io.out, Stderr: io.err, Quiet: *quiet,
			Without: without, RequireIsolation: *requireIso}, *inPlace)
	}
}

// runCommand runs the command under the policy (enforcer.Run), first
// printing the ruleset and the environment with -v; lockstep's own signals
// kill the command and exit 128+n. With inPlace (--exec) lockstep becomes
// the command (enforcer.Exec) and returns only when nothing ran.
func runCommand(ctx context.Context, io *stdio, opts enforcer.Options, inPlace bool) int {
	if io.verbose {
		// The ruleset as the kernel will get it; Run prepares it again.
		if prep, err := enforcer.Prepare(opts); err == nil {
			for _, l := range append(prep.Ruleset.Describe(), wide.Links(opts.Policy)...) {
				fmt.Fprintf(io.err, "lockstep run: %s\n", l)
			}
		}
		fmt.Fprintf(io.err, "lockstep run: environment: %s; left out: %s\n",
			strings.Join(envNames(opts.Env), ","), strings.Join(enforcer.DroppedEnv(os.Environ(), opts.Env), ","))
	}
	if inPlace {
		return execCommand(ctx, io, opts)
	}
	ctx, stop := cli.NotifyContext(ctx, runSignals...)
	defer stop()
	status, err := enforcer.Run(ctx, opts)
	var sig cli.Signal
	if errors.Is(err, enforcer.ErrInterrupted) && errors.As(context.Cause(ctx), &sig) {
		return fail(io, "run", 128+int(sig.Signal), err)
	}
	if err != nil {
		enforcer.WriteRefusal(io.err, err)
	}
	return status
}

// execCommand is run --exec: lockstep becomes the command. A SIGINT or
// SIGTERM caught before (main's context) ends it with 128+n, nothing run.
func execCommand(ctx context.Context, io *stdio, opts enforcer.Options) int {
	if ctx.Err() != nil {
		err := fmt.Errorf("%w (%v). Nothing ran", enforcer.ErrInterrupted, context.Cause(ctx))
		return fail(io, "run", enforcer.StatusInterrupt, err)
	}
	status, err := enforcer.Exec(opts)
	enforcer.WriteRefusal(io.err, err)
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

// envRules parses the --env flags.
func envRules(flags []string) ([]enforcer.EnvRule, error) {
	var rules []enforcer.EnvRule
	for _, f := range flags {
		r, err := enforcer.ParseEnvRule(f)
		if err != nil {
			return nil, fmt.Errorf("--env %w", err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// envFileRules reads the --env-file files, in order. The command's
// environment is the caller's safe variables, then these rules, then the
// --env flags (a later rule for a name wins).
func envFileRules(files []string) ([]enforcer.EnvRule, error) {
	var rules []enforcer.EnvRule
	for _, f := range files {
		rs, err := enforcer.ReadEnvFile(f)
		if err != nil {
			return nil, err
		}
		rules = append(rules, rs...)
	}
	return rules, nil
}

func envNames(env []string) []string {
	names := make([]string, len(env))
	for i, kv := range env {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	return names
}

// runSignals are the signals on which lockstep run kills the command and
// its cgroup, removes the cgroup and exits 128+n. Without this SIGHUP
// ended lockstep at once and SIGQUIT dumped its goroutines, both leaving
// the command running and its cgroup behind. main's context ends on SIGINT
// and SIGTERM too, with the same cause.
var runSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM}
