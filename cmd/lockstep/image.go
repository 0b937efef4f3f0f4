package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/lockstep-sandbox/lockstep/images"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
)

func init() {
	register(&verb{
		Name:  "image",
		Usage: "image {build|list|path|digest} [--rebuild] [--lock] [--json] [<name>|<dir>]",
		Short: "build, list and locate pinned guest root file systems",
		Long: `Guest root file systems are recipes in images/<name>/packages.txt (a Debian suite
and every package of the root at an exact version), built into the binary.

  build <name>  debootstrap --variant=minbase from this machine's own apt sources, then
                install exactly the listed versions in a chroot; refuse the root if its
                installed packages differ from the list in any way. Prints the name, the
                manifest hash (the image's content identity) and the root directory.
                Needs root and the debootstrap package. A checked cached image is reused
                unless --rebuild. With --lock, packages the list does not name are allowed
                and the full closure is printed in packages.txt form instead.
  list          every recipe, and the images in the cache.
  path <name>   the root directory of the built image, after checking its packages
                against its manifest; use it as --root of boot, observe and prune.
  digest <dir>  the content digest of the root file system at <dir> (sha256:<hex> over
                a manifest of its programs, libraries and configuration; see
                docs/orchestrate.md): the provenance.root_digest that prune and observe
                record for a guest booted with --root <dir>.

Images live in $XDG_CACHE_HOME/lockstep/images/<name>-<key> (default ~/.cache).

A build takes minutes: it prints a progress line per stage on stderr
("lockstep image [<elapsed>] …", one line that rewrites itself where stderr is
a terminal); -q leaves only warnings and the result.`,
		Example: `# Build the generic guest root and boot a command in it
$ lockstep image build generic
$ lockstep boot --root "$(lockstep image path generic)" -- bash -c 'dpkg -l | wc -l'`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *stdio, []string) int {
			rebuild := fs.Bool("rebuild", false, "build even when a checked image is cached")
			lock := fs.Bool("lock", false, "allow unlisted dependencies and print the closure as a new packages.txt")
			asJSON := fs.Bool("json", false, "print one JSON document on stdout")
			quiet := fs.Bool("q", false, "quiet: no progress lines (a line per stage of a build), only warnings and the result")
			return func(ctx context.Context, io *stdio, args []string) int {
				v := verbs["image"]
				if len(args) == 0 {
					return usageExit(io, v, usagef("missing subcommand: build, list, path or digest"))
				}
				// Flags may also follow the subcommand: image build --rebuild generic.
				sub := args[0]
				sfs := flag.NewFlagSet("image "+sub, flag.ContinueOnError)
				sfs.SetOutput(io.err)
				sfs.Usage = func() {}
				sfs.BoolVar(rebuild, "rebuild", *rebuild, "")
				sfs.BoolVar(lock, "lock", *lock, "")
				sfs.BoolVar(asJSON, "json", *asJSON, "")
				sfs.BoolVar(quiet, "q", *quiet, "")
				sfs.BoolVar(&io.verbose, "v", io.verbose, "")
				if err := sfs.Parse(args[1:]); err != nil {
					return usageExit(io, v, err)
				}
				rest := sfs.Args()
				io, end := withProgressDisplay(io, "image")
				defer end()
				opts := images.Options{Rebuild: *rebuild, Lock: *lock, Log: progressLogger(io, "image", *quiet)}
				switch sub {
				case "list":
					if len(rest) != 0 {
						return usageExit(io, v, usagef("list takes no arguments, got %q", rest))
					}
					return imageList(io, opts, *asJSON)
				case "digest":
					if len(rest) != 1 {
						return usageExit(io, v, usagef("digest takes one root directory, got %q", rest))
					}
					d, err := rootdigest.Of(rest[0])
					if err != nil {
						return fail(io, "image", exitFail, err)
					}
					fmt.Fprintln(io.out, d)
					return exitOK
				case "build", "path":
					if len(rest) != 1 {
						return usageExit(io, v, usagef("%s takes one image name (one of: %v)", sub, images.Names()))
					}
					return imageBuildOrPath(ctx, io, sub, rest[0], opts, *asJSON)
				default:
					return usageExit(io, v, usagef("unknown subcommand %q: want build, list, path or digest", sub))
				}
			}
		},
	})
}

// imageBuildOrPath builds (sub "build") or looks up (sub "path") the image
// of the recipe name and prints it.
func imageBuildOrPath(ctx context.Context, io *stdio, sub, name string, opts images.Options, asJSON bool) int {
	r, err := images.LoadRecipe(name)
	if err != nil {
		if errors.Is(err, images.ErrNoRecipe) {
			return usageExit(io, verbs["image"], err)
		}
		return fail(io, "image", exitFail, err)
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
			fmt.Fprintf(io.err, "%s\n", be.Tail)
		}
		return fail(io, "image", exitFail, err)
	}
	return imagePrint(io, sub, img, opts.Lock, asJSON, r.Suite)
}

type imageJSON struct {
	Schema       int    `json:"schema_version"`
	Name         string `json:"name"`
	Root         string `json:"root"`
	RecipeKey    string `json:"recipe_key"`
	ManifestHash string `json:"manifest_sha256"`
	Packages     int    `json:"packages"`
	Cached       bool   `json:"cached"`
}

func imagePrint(io *stdio, sub string, img *images.Image, lock, asJSON bool, suite string) int {
	switch {
	case asJSON:
		b, _ := json.MarshalIndent(imageJSON{Schema: 1, Name: img.Name, Root: img.Root, RecipeKey: img.RecipeKey,
			ManifestHash: img.ManifestHash, Packages: len(img.Manifest), Cached: img.Cached}, "", "  ")
		fmt.Fprintf(io.out, "%s\n", b)
	case sub == "path":
		fmt.Fprintln(io.out, img.Root)
	case lock:
		io.out.Write(img.Manifest.Recipe(suite))
		fmt.Fprintf(io.err, "image %s: %d packages, manifest %s, root %s\n", img.Name, len(img.Manifest), img.ManifestHash, img.Root)
	default:
		state := "built"
		if img.Cached {
			state = "cached"
		}
		fmt.Fprintf(io.out, "%s %s %s (%s, %d packages)\n", img.Name, img.ManifestHash, img.Root, state, len(img.Manifest))
	}
	return exitOK
}

func imageList(io *stdio, opts images.Options, asJSON bool) int {
	type row struct {
		Name      string `json:"name"`
		RecipeKey string `json:"recipe_key"`
		Built     string `json:"built_root,omitempty"`
		Manifest  string `json:"manifest_sha256,omitempty"`
		Problem   string `json:"problem,omitempty"`
	}
	var rows []row
	for _, n := range images.Names() {
		r, err := images.LoadRecipe(n)
		if err != nil {
			rows = append(rows, row{Name: n, Problem: err.Error()})
			continue
		}
		rw := row{Name: n, RecipeKey: r.Key()}
		if img, err := images.Lookup(r, opts); err == nil {
			rw.Built, rw.Manifest = img.Root, img.ManifestHash
		} else if !errors.Is(err, images.ErrNotBuilt) {
			rw.Problem = err.Error()
		}
		rows = append(rows, rw)
	}
	if asJSON {
		b, _ := json.MarshalIndent(struct {
			Schema int   `json:"schema_version"`
			Images []row `json:"images"`
		}{1, rows}, "", "  ")
		fmt.Fprintf(io.out, "%s\n", b)
		return exitOK
	}
	for _, rw := range rows {
		switch {
		case rw.Problem != "":
			fmt.Fprintf(io.out, "%-10s %.16s  refused: %s\n", rw.Name, rw.RecipeKey, rw.Problem)
		case rw.Built != "":
			fmt.Fprintf(io.out, "%-10s %.16s  %s  %s\n", rw.Name, rw.RecipeKey, rw.Manifest, rw.Built)
		default:
			fmt.Fprintf(io.out, "%-10s %.16s  not built\n", rw.Name, rw.RecipeKey)
		}
	}
	return exitOK
}
