package main

import (
	"context"
	"flag"

	"github.com/lockstep-sandbox/lockstep/observer/lane"
)

// The hidden verb the observer's side-by-side runs start as (package lane).
func init() {
	register(&verb{
		Name:   lane.Verb,
		Hidden: true,
		Usage:  lane.Verb + " --from <copy> --at <working directory> [--cpus <list>] -- <command>…",
		Short:  "the start of each of the observer's side-by-side runs: its own mount and network namespace, its copy at the working directory",
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
			from := fs.String("from", "", "the run's copy of the exercise")
			at := fs.String("at", "", "the working directory the run sees it at")
			cpuList := fs.String("cpus", "", "the only CPUs the run may use, comma-separated (default: those it started with)")
			return func(ctx context.Context, io *stdio, args []string) int {
				cpus, err := lane.ParseCPUs(*cpuList)
				if err != nil {
					return fail(io, lane.Verb, 2, err)
				}
				return lane.Exec(*from, *at, cpus, args, io.err)
			}
		},
	})
}
