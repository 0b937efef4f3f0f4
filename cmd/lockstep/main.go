package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

func main() {
	// PID 1 started as /init is the guest: the initramfs carries exactly this
	// binary there. PID 1 under any other name (a container's entry point,
	// `docker run` without --init) is an ordinary command line.
	if os.Getpid() == 1 && os.Args[0] == "/init" && guestMain != nil {
		guestMain()
		return
	}
	// Hidden re-exec roles (the enforcer's child) take over before flag parsing.
	if name := os.Getenv(roleEnv); name != "" {
		os.Exit(roleMain(name))
	}
	os.Exit(serve(func(ctx context.Context) int { return run(ctx, os.Args[1:], newStdio()) }))
}

// serve runs f as a command line of lockstep's runs: with a context that
// SIGINT and SIGTERM cancel, and without passing on what it inherited.
func serve(f func(ctx context.Context) int) int {
	// Descriptors this process inherited beyond stdin, stdout and stderr
	// (a CI runner's, a shell's) are not passed on to what lockstep runs:
	// a sandboxed command must not hold files opened outside its policy,
	// and the pruner's nofile measurement must not depend on the caller.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	ctx, stop := cli.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return f(ctx)
}

// guestMain is set by the guest verb's file; it never returns.
var guestMain func()

// roleEnv names the environment variable that selects a hidden role when
// lockstep re-executes itself (for example the enforcer's restricted child).
const roleEnv = proto.EnvRole

// hiddenRoles maps a LOCKSTEP_ROLE value to its entry point; each returns the
// process exit status, and says so itself when it was not started by the
// lockstep that owns it.
var hiddenRoles = map[string]func() int{}

// roleMain runs the hidden role name. A value that names no role is
// refused rather than ignored: LOCKSTEP_ROLE is lockstep's own, set only
// when it re-executes itself, so any other value means the caller's
// environment is wrong (a usage error, docs/exit-codes.md).
func roleMain(name string) int {
	if role, ok := hiddenRoles[name]; ok {
		return role()
	}
	roles := make([]string, 0, len(hiddenRoles))
	for r := range hiddenRoles {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	fmt.Fprintf(os.Stderr, "lockstep: %s=%q names no role (lockstep sets it, to one of %s, only when it re-executes itself): unset %s\n",
		roleEnv, name, strings.Join(roles, ", "), roleEnv)
	return exitUsage
}
