package main

import (
	"context"
	"flag"

	"github.com/lockstep-sandbox/lockstep/pruner/cold"
)

// The hidden verb every run of lockstep prune starts as (package cold).
func init() {
	register(&verb{
		Name:   cold.Verb,
		Hidden: true,
		Usage:  cold.Verb + " --stage <dir> [--keep <dir>]… -- <command>…",
		Short:  "the start of each run of lockstep prune: a mount namespace whose system paths are throwaway overlays",
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
			stage := fs.String("stage", "", "an empty directory for the run's tmpfs")
			var keep []string
			fs.Func("keep", "a directory whose writes stay (repeatable)", func(s string) error { keep = append(keep, s); return nil })
			return func(ctx context.Context, io *stdio, args []string) int { return cold.Exec(*stage, keep, args, io.err) }
		},
	})
}
