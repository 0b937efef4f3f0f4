package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// guestRole registers a workload's guest side as the hidden role name: the
// job its host side boots a guest with (harness.Options.SetRole) names the
// role, and the role reads its typed options from the job
// (proto.OptionsFile) where a command line would have given flags; verb
// prefixes its messages.
func guestRole[T any](name, verb string, run func(ctx context.Context, io *stdio, opts T) int) {
	hiddenRoles[name] = func() int {
		// What the role starts (lockstep run, the exercises, the observed
		// command) must not play it again.
		os.Unsetenv(roleEnv)
		if os.Getenv(proto.EnvGuest) != "1" {
			fmt.Fprintf(os.Stderr, "lockstep: %s=%s is set, but this is not a lockstep guest (%s is not 1; the role is the job a guest is booted with): unset %s\n",
				roleEnv, name, proto.EnvGuest, roleEnv)
			return exitUsage
		}
		io := newStdio()
		var opts T
		if err := proto.ReadOptions(proto.OptionsFile, &opts); err != nil {
			return fail(io, verb, exitIndeterminate, err)
		}
		return serve(func(ctx context.Context) int { return run(ctx, io, opts) })
	}
}
