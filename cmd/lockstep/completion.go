package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "completion",
		Usage:   "completion {bash|zsh}",
		Short:   "print a shell completion script for bash or zsh: verbs, subcommands and flags",
		Long:    help("completion", nil),
		Example: example("completion"),
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
			return func(_ context.Context, io *cli.Stdio, args []string) int {
				if len(args) != 1 {
					return cli.UsageExit(io, verbs["completion"], cli.Usagef("want one shell, bash or zsh"))
				}
				switch args[0] {
				case "bash":
					verbs.WriteBashCompletion(io.Out)
				case "zsh":
					fmt.Fprint(io.Out, "#compdef lockstep\n# zsh completion for lockstep: the bash script through bashcompinit.\nautoload -U +X bashcompinit && bashcompinit\n")
					verbs.WriteBashCompletion(io.Out)
				default:
					return cli.UsageExit(io, verbs["completion"], cli.Usagef("unknown shell %q: want bash or zsh", args[0]))
				}
				return cli.ExitOK
			}
		},
	})
}

// globalWords are what may come before a verb.
