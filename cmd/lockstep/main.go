package main

import (
	"context"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

func main() {
	if role, ok := helperRole(os.Args); ok {
		os.Exit(role())
	}
	os.Exit(serve(func(ctx context.Context) int { return run(ctx, os.Args[1:], cli.NewStdio()) }))
}

// serve runs f as a command line of lockstep's runs: with a context that
// SIGINT and SIGTERM cancel, and without passing on what it inherited.
func serve(f func(ctx context.Context) int) int {
	closeInheritedOnExec()
	ctx, stop := cli.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return f(ctx)
}

// closeInheritedOnExec marks the descriptors this process inherited beyond
// stdin, stdout and stderr (a CI runner's, a shell's) close-on-exec, so
// they are not passed on to what lockstep runs: a sandboxed command must not hold
// files opened outside its policy, and the pruner's nofile measurement
// must not depend on the caller.
func closeInheritedOnExec() { _ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) }

// verbs is lockstep's verb table; each verb registers in its file's init.
var verbs = cli.Verbs{}

// run runs the command line args (without the program's name).
func run(ctx context.Context, args []string, io *cli.Stdio) int { return verbs.Run(ctx, args, io) }
