package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/observer/lane"
	"github.com/lockstep-sandbox/lockstep/pruner/cold"
)

// A helper role is lockstep run as a helper of itself, never as a user's
// command line. The registry below is every role and how it is entered:
//   - the guest's init: PID 1 started as /init (the initramfs carries exactly
//     this binary there; PID 1 under any other name, a container's entry
//     point, is an ordinary command line);
//   - an environment role: LOCKSTEP_ROLE=<name>, set only by the lockstep
//     that re-executes itself (the enforcer's child and init, the proof's
//     refusal child) or by the harness for a workload's guest side, which
//     reads its typed options from the job (guestRole);
//   - a command-line role: `lockstep <name> …`, whose command line is the
//     role's own, built and parsed by the package that owns the role
//     (its Command and Main).

// roleEnv names the environment variable that selects an environment role.
const roleEnv = proto.EnvRole

// envRoles maps a LOCKSTEP_ROLE value to its entry point; each returns the
// process exit status, and says so itself when it was not started by the
// lockstep that owns it.
var envRoles = map[string]func() int{}

// argvRoles maps a command-line role's first argument to the package's
// parser and entry point; each returns only on failure.
var argvRoles = map[string]func(args []string, stderr io.Writer) int{
	cold.Verb:  cold.Main,
	lane.Verb:  lane.Main,
	refns.Verb: refns.Main,
}

// helperRole is the role this process was started as, if any.
func helperRole(args []string) (func() int, bool) {
	if os.Getpid() == 1 && args[0] == "/init" {
		return func() int { guest.Main(); return 0 }, true
	}
	if name := os.Getenv(roleEnv); name != "" {
		return func() int { return roleMain(name) }, true
	}
	if len(args) > 1 {
		if main, ok := argvRoles[args[1]]; ok {
			return func() int { closeInheritedOnExec(); return main(args[2:], os.Stderr) }, true
		}
	}
	return nil, false
}

// roleMain runs the environment role name. A value that names no role is
// refused rather than ignored: LOCKSTEP_ROLE is lockstep's own, set only
// when it re-executes itself, so any other value means the caller's
// environment is wrong (a usage error, docs/exit-codes.md).
func roleMain(name string) int {
	if role, ok := envRoles[name]; ok {
		return role()
	}
	roles := make([]string, 0, len(envRoles))
	for r := range envRoles {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	fmt.Fprintf(os.Stderr, "lockstep: %s=%q names no role (lockstep sets it, to one of %s, only when it re-executes itself): unset %s\n",
		roleEnv, name, strings.Join(roles, ", "), roleEnv)
	return cli.ExitUsage
}

// guestRole registers a workload's guest side as the environment role
// name: the job its host side boots a guest with (harness.Options.SetRole)
// names the role, and the role reads its typed options from the job
// (proto.OptionsFile) where a command line would have given flags; verb
// prefixes its messages.
func guestRole[T any](name, verb string, run func(ctx context.Context, io *cli.Stdio, opts T) int) {
	envRoles[name] = func() int {
		// What the role starts (lockstep run, the exercises, the observed
		// command) must not play it again.
		os.Unsetenv(roleEnv)
		if os.Getenv(proto.EnvGuest) != "1" {
			fmt.Fprintf(os.Stderr, "lockstep: %s=%s is set, but this is not a lockstep guest (%s is not 1; the role is the job a guest is booted with): unset %s\n",
				roleEnv, name, proto.EnvGuest, roleEnv)
			return cli.ExitUsage
		}
		io := cli.NewStdio()
		var opts T
		if err := proto.ReadOptions(proto.OptionsFile, &opts); err != nil {
			return cli.Fail(io, verb, cli.ExitIndeterminate, err)
		}
		return serve(func(ctx context.Context) int { return run(ctx, io, opts) })
	}
}
