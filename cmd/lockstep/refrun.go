package main

import (
	"context"
	"flag"

	"github.com/lockstep-sandbox/lockstep/internal/refns"
)

// The hidden verb an isolated reference run starts as (package
// internal/refns), in the namespaces its starter cloned it into.
func init() {
	register(&verb{
		Name:   refns.Verb,
		Hidden: true,
		Usage:  refns.Verb + " [" + refns.CloneFlag + "] [--read-only <path>]… [--writable <path>]… -- <command>…",
		Short:  "the start of an isolated reference run: PID 1 of its user, mount and PID namespaces",
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
			clone := fs.Bool("clone", false, "clone this program into the run's namespaces first (for a starter that executes it in place)")
			var readOnly, writable []string
			fs.Func("read-only", "a path the run sees read-only (repeatable)", func(s string) error { readOnly = append(readOnly, s); return nil })
			fs.Func("writable", "a path below a read-only one the run may write (repeatable)", func(s string) error { writable = append(writable, s); return nil })
			return func(ctx context.Context, io *stdio, args []string) int {
				if *clone {
					return refns.Clone(readOnly, writable, args, io.err)
				}
				return refns.Serve(readOnly, writable, args, io.err)
			}
		},
	})
}
