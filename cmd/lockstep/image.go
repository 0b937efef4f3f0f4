package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/images"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "image",
		Usage:   "image {build|list|path|digest} [--rebuild] [--lock] [--json] [<name>|<dir>]",
		Short:   "build, list and locate pinned guest root file systems",
		Long:    help("image", nil),
		Example: example("image"),
		Flags: func(fs *flag.FlagSet) func(context.Context, *cli.Stdio, []string) int {
			rebuild := fs.Bool("rebuild", false, "build even when a checked image is cached")
			lock := fs.Bool("lock", false, "allow unlisted dependencies and print the closure as a new packages.txt")
			asJSON := fs.Bool("json", false, "print one JSON document on stdout")
			quiet := fs.Bool("q", false, "quiet: no progress lines (a line per stage of a build), only warnings and the result")
			return func(ctx context.Context, io *cli.Stdio, args []string) int {
				v := verbs["image"]
				if len(args) == 0 {
					return cli.UsageExit(io, v, cli.Usagef("missing subcommand: build, list, path or digest"))
				}
				// Flags may also follow the subcommand: image build --rebuild generic.
				sub := args[0]
				sfs := flag.NewFlagSet("image "+sub, flag.ContinueOnError)
				sfs.SetOutput(io.Err)
				sfs.Usage = func() {}
				sfs.BoolVar(rebuild, "rebuild", *rebuild, "")
				sfs.BoolVar(lock, "lock", *lock, "")
				sfs.BoolVar(asJSON, "json", *asJSON, "")
				sfs.BoolVar(quiet, "q", *quiet, "")
				sfs.BoolVar(&io.Verbose, "v", io.Verbose, "")
				if err := sfs.Parse(args[1:]); err != nil {
					return cli.UsageExit(io, v, err)
				}
				rest := sfs.Args()
				io, end := io.WithDisplay("image")
				defer end()
				opts := images.Options{Rebuild: *rebuild, Lock: *lock, Log: io.ProgressLog("image", *quiet)}
				switch sub {
				case "list":
					if len(rest) != 0 {
						return cli.UsageExit(io, v, cli.Usagef("list takes no arguments, got %q", rest))
					}
					images.WriteList(io.Out, opts, *asJSON)
					return cli.ExitOK
				case "digest":
					if len(rest) != 1 {
						return cli.UsageExit(io, v, cli.Usagef("digest takes one root directory, got %q", rest))
					}
					d, err := rootdigest.Of(rest[0])
					if err != nil {
						return cli.Fail(io, "image", cli.ExitFail, err)
					}
					fmt.Fprintln(io.Out, d)
					return cli.ExitOK
				case "build", "path":
					if len(rest) != 1 {
						return cli.UsageExit(io, v, cli.Usagef("%s takes one image name (one of: %v)", sub, images.Names()))
					}
					return imageBuildOrPath(ctx, io, sub, rest[0], opts, *asJSON)
				default:
					return cli.UsageExit(io, v, cli.Usagef("unknown subcommand %q: want build, list, path or digest", sub))
				}
			}
		},
	})
}

// imageBuildOrPath builds (sub "build") or looks up (sub "path") the image
// of the recipe name and prints it.
func imageBuildOrPath(ctx context.Context, io *cli.Stdio, sub, name string, opts images.Options, asJSON bool) int {
	r, err := images.LoadRecipe(name)
	if err != nil {
		if errors.Is(err, images.ErrNoRecipe) {
			return cli.UsageExit(io, verbs["image"], err)
		}
		return cli.Fail(io, "image", cli.ExitFail, err)
	}
	var img *images.Image
	if sub == "build" {
		img, err = images.Build(ctx, r, opts)
	} else {
		img, err = images.Lookup(r, opts)
	}
	if err != nil {
		var be *images.BuildError
		if errors.As(err, &be) && be.Tail != "" {
			fmt.Fprintf(io.Err, "%s\n", be.Tail)
		}
		return cli.Fail(io, "image", cli.ExitFail, err)
	}
	img.WriteText(io.Out, io.Err, sub == "path", opts.Lock, asJSON, r.Suite)
	return cli.ExitOK
}
