package prune

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/contain"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/pruner/cold"
	"golang.org/x/sys/unix"
)

// EnforcerVerb is the first argument under which ServeRoles makes a program
// the enforcer: `<program> lockstep-enforce [-q] --config <file>… --
// <command>…` runs the command under the policy files as `lockstep run`
// does. The default Options.Enforcer is {os.Executable(), EnforcerVerb}. It
// is not "run", so a program's own verb of that name stays its own.
const EnforcerVerb = "lockstep-enforce"

// ServeRoles lets the program that calls Prune be every process Prune
// starts of it, so no lockstep CLI has to be installed. Call it first thing
// in main, before flags are parsed: when the process was started as one of
// those roles, ServeRoles plays it and exits with its status; otherwise it
// returns at once and changes nothing.
//
//   - os.Args[1] == EnforcerVerb: the enforcer (the default
//     Options.Enforcer).
//   - os.Args[1] == contain.Verb: the containment probe (the default
//     ContainOptions.Probe), and the processes its nproc check starts.
//   - os.Args[1] == cold.Verb: the start of every run, in a mount
//     namespace of its own (the default Options.ColdRun; package cold).
//   - os.Args[1] == refns.Verb: the start of every baseline run, isolated
//     in namespaces of its own (package internal/refns), before its
//     cold-run.
//
// The enforcer's own re-executions (its restricted child and its cgroup
// reaper, selected by enforcer.RoleEnv) need no call: package enforcer's
// init serves them in every program that links it.
func ServeRoles() {
	servesRoles.Store(true)
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case EnforcerVerb:
		os.Exit(enforceMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	case contain.Verb:
		os.Exit(contain.ProbeMain(os.Args[2:], os.Stdout))
	case cold.Verb:
		os.Exit(cold.Main(os.Args[2:], os.Stderr))
	case refns.Verb:
		os.Exit(refns.Main(os.Args[2:], os.Stderr))
	}
}

// servesRoles says ServeRoles was called, so the default enforcer and probe
// (this program) play their roles. Without it, a program re-executed as its
// own enforcer would run its main again, prune again and start itself
// without end.
var servesRoles atomic.Bool

// errNoRoles is Prune's refusal to use the default enforcer in a program
// that does not serve its roles.
var errNoRoles = errors.New("the default enforcer is this program, but it did not call prune.ServeRoles first thing in main: call it there, or set Options.Enforcer (lockstep's is {<path of lockstep>, \"run\"})")

// enforceMain is the enforcer role: the part of `lockstep run` the pruner
// and the containment probe use (--config, -q, then the command), with the
// same environment scrubbing, statuses and refusal lines.
func enforceMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// As lockstep's main does: a descriptor the caller leaked must not
	// reach the command (nor move its nofile measurement).
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	fs := flag.NewFlagSet(EnforcerVerb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var configs []string
	fs.Func("config", "policy file (repeatable)", func(s string) error { configs = append(configs, s); return nil })
	quiet := fs.Bool("q", false, "leave out the status line")
	err := fs.Parse(args)
	switch {
	case err != nil:
	case fs.NArg() == 0:
		err = errors.New("no command given after --")
	case len(configs) == 0:
		err = errors.New("no policy: give --config <file>")
	}
	if err != nil {
		fmt.Fprintf(stderr, "usage: lockstep run [-q] --config <file>… -- <command>… (as %s): %v\n", EnforcerVerb, err)
		return verdict.UsageStatus
	}
	p, err := policy.Load("", configs)
	if err != nil {
		if !errors.As(err, new(policy.ErrorList)) {
			err = fmt.Errorf("%w. Nothing ran", err)
		}
		return refused(stderr, enforcer.StatusRefused, err)
	}
	// The signals that end lockstep run's command end this one's, and
	// the enforcer then exits 128+n as lockstep run does.
	ctx, stop := cli.NotifyContext(context.Background(), enforcer.Signals...)
	defer stop()
	// Env nil: the caller's variables that enforcer.SafeEnvName lets pass,
	// as `lockstep run` without --env. Without the layers that hide
	// Landlock's own refusals, as enforcer.Prefix runs `lockstep run`:
	// they are what the pruner measures.
	status, err := enforcer.Run(ctx, enforcer.Options{Policy: p, Command: fs.Args(),
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Quiet: *quiet, Without: enforcer.MeasureWithout})
	var sig cli.Signal
	if errors.Is(err, enforcer.ErrInterrupted) && errors.As(context.Cause(ctx), &sig) {
		status = 128 + int(sig.Signal)
	}
	if err != nil {
		return refused(stderr, status, err)
	}
	return status
}

// refused prints why the enforcer stopped, as `lockstep run` does, and
// returns status.
func refused(w io.Writer, status int, err error) int {
	enforcer.WriteRefusal(w, err)
	return status
}
