package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "kernel",
		Usage:   "kernel {build|verify|list|path|key|fragment|mirror|pin} [--pin <version>] [--cache <dir>] [--pins <file>]",
		Short:   "fetch, build, cache and verify the pinned guest kernels",
		Long:    help("kernel", nil),
		Example: example("kernel"),
		Flags:   kernelFlags,
	})
}

type kernelOptions struct {
	pin   string
	cache string
	jobs  int
	make  kernelPinFlags
}

// kernelPinFlags are kernel pin's.
type kernelPinFlags struct {
	source, image, suite, name string
	abi                        int
}

func kernelFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
	o := &kernelOptions{}
	cli.StrictVar(fs, &o.pin, "pin", kernel.DefaultPin, "kernel `version` from kernel/pins.txt", wantPin)
	fs.StringVar(&o.cache, "cache", "", "cache `dir` (default $XDG_CACHE_HOME/lockstep/kernels)")
	fs.IntVar(&o.jobs, "jobs", 0, "make -j `n` (default: the number of CPUs)")
	pinsFlag(fs)
	fs.StringVar(&o.make.source, "debian-source", "", "pin: the linux-source-X.Y[=VERSION] `package` to pin")
	fs.StringVar(&o.make.image, "debian-image", "", "pin: the linux-image-…[=VERSION] `package` to pin (Debian's prebuilt kernel)")
	fs.StringVar(&o.make.suite, "suite", "", "pin: the Debian `suite` to fetch from (default: this machine's)")
	fs.StringVar(&o.make.name, "name", "", "pin: the pin's `name` (default: the kernel version, or an image's release)")
	fs.IntVar(&o.make.abi, "abi", 0, "pin: the Landlock `abi` the kernel offers (default: from its version, when known)")
	return func(ctx context.Context, io *cli.Stdio, args []string) int {
		v := verbs["kernel"]
		if len(args) == 0 {
			return cli.UsageExit(io, v, cli.Usagef("missing subcommand: want build, verify, list, path, key, fragment, mirror or pin"))
		}
		sub := args[0]
		// Flags may follow the subcommand: kernel build --pin 7.2.13.
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				cli.PrintVerbHelp(io.Out, v)
				return cli.ExitOK
			}
			return cli.UsageExit(io, v, err)
		}
		if fs.NArg() > 0 {
			return cli.UsageExit(io, v, cli.Usagef("unexpected argument %q", fs.Arg(0)))
		}
		b := &kernel.Builder{CacheDir: o.cache, Jobs: o.jobs, Log: kernelLogger(io)}
		switch sub {
		case "build":
			return kernelBuild(ctx, io, b, o, false)
		case "path":
			return kernelBuild(ctx, io, b, o, true)
		case "verify":
			return kernelVerify(ctx, io, b, o)
		case "list":
			return kernelList(ctx, io, b)
		case "key":
			return kernelKey(io, b, o)
		case "fragment":
			return kernelFragment(io, o)
		case "mirror":
			return kernelMirror(io)
		case "pin":
			return kernelPin(ctx, io, b, o.make)
		}
		return cli.UsageExit(io, v, cli.Usagef("unknown subcommand %q: want build, verify, list, path, key, fragment, mirror or pin", sub))
	}
}

// kernelExit maps a kernel package error to an exit status, printing it.
func kernelExit(io *cli.Stdio, err error) int {
	kernel.WriteErrorDetail(io.Err, err)
	switch {
	case errors.Is(err, kernel.ErrUnfit):
		return cli.Fail(io, "kernel", cli.ExitIndeterminate, err)
	case errors.Is(err, kernel.ErrUnknownPin):
		return cli.Fail(io, "kernel", cli.ExitUsage, err)
	}
	return cli.Fail(io, "kernel", cli.ExitFail, err)
}

func kernelBuild(ctx context.Context, io *cli.Stdio, b *kernel.Builder, o *kernelOptions, pathOnly bool) int {
	r, err := b.Build(ctx, o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	if pathOnly {
		fmt.Fprintln(io.Out, r.BzImage)
		return cli.ExitOK
	}
	kernel.WriteBuilt(io.Out, r)
	return cli.ExitOK
}

// kernelFragment prints the fragment as the pin's build applies it.
func kernelFragment(io *cli.Stdio, o *kernelOptions) int {
	pin, err := kernel.Lookup(o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	f, err := kernel.FragmentFor(pin.Version, kernel.Fragment())
	if err != nil {
		return kernelExit(io, err)
	}
	io.Out.Write(f)
	return cli.ExitOK
}

// kernelKey prints the pin's content key: SHA-256 over the pin row, the
// fragment, the builder version and the toolchain versions.
func kernelKey(io *cli.Stdio, b *kernel.Builder, o *kernelOptions) int {
	pin, err := kernel.Lookup(o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	key, err := b.Key(pin)
	if err != nil {
		return kernelExit(io, err)
	}
	fmt.Fprintln(io.Out, key)
	return cli.ExitOK
}

func kernelVerify(ctx context.Context, io *cli.Stdio, b *kernel.Builder, o *kernelOptions) int {
	r, err := b.Verify(ctx, o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	kernel.WriteVerified(io.Out, io.Err, r)
	return cli.ExitOK
}

func kernelList(ctx context.Context, io *cli.Stdio, b *kernel.Builder) int {
	es, err := b.List(ctx)
	if err != nil {
		return kernelExit(io, err)
	}
	kernel.WriteList(io.Out, es, b.Cache())
	return cli.ExitOK
}

// kernelPin prints the row kernel.MakePin computes.
func kernelPin(ctx context.Context, io *cli.Stdio, b *kernel.Builder, f kernelPinFlags) int {
	req := kernel.PinRequest{Suite: f.suite, Name: f.name, ABI: f.abi}
	switch {
	case (f.source == "") == (f.image == ""):
		return cli.UsageExit(io, verbs["kernel"], cli.Usagef("kernel pin: give one of --debian-source linux-source-X.Y[=VERSION] or --debian-image linux-image-…[=VERSION]"))
	case f.source != "":
		req.Source = kernel.SourceDebian
		req.Package, req.Version, _ = strings.Cut(f.source, "=")
	default:
		req.Source = kernel.SourceDebianImage
		req.Package, req.Version, _ = strings.Cut(f.image, "=")
	}
	if f.abi < 0 {
		return cli.UsageExit(io, verbs["kernel"], cli.Usagef("--abi %d: want a Landlock ABI of 1 or more", f.abi))
	}
	p, err := b.MakePin(ctx, req)
	if err != nil {
		return kernelExit(io, err)
	}
	fmt.Fprintf(io.Err, "lockstep kernel: %s=%s (%s) fetched into %s\n", p.Package, p.PackageVersion, p.Suite, p.Deb)
	fmt.Fprintln(io.Out, p.Row)
	return cli.ExitOK
}

func kernelMirror(io *cli.Stdio) int {
	uris, err := kernel.DebianURIs()
	if err != nil {
		return cli.Fail(io, "kernel", cli.ExitFail, err)
	}
	for _, u := range uris {
		fmt.Fprintln(io.Out, u)
	}
	return cli.ExitOK
}

// pinsFlag is --pins on every verb that takes a kernel: a pin file whose
// rows join the shipped pins (as $LOCKSTEP_PINS does), read as the flag is
// parsed so that a bad row is a usage error.
func pinsFlag(fs *flag.FlagSet) {
	fs.Func("pins", "pin `file` whose rows (kernel/pins.txt's grammar) join the shipped pins, as $"+kernel.PinsEnv+" does", kernel.UsePinsFile)
}

// kernelLogger shows progress (a build takes minutes, so always) and, with
// -v, every external command.
func kernelLogger(io *cli.Stdio) *slog.Logger {
	// The kernel package's messages name their stage ("kernel: compiling").
	return cli.Logger(io.Err, "lockstep ", cli.Level(slog.LevelInfo, false, io.Verbose))
}
