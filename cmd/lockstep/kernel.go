package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

func init() {
	register(&verb{
		Name:  "kernel",
		Usage: "kernel {build|verify|list|path|key|fragment|mirror|pin} [--pin <version>] [--cache <dir>] [--pins <file>]",
		Short: "fetch, build, cache and verify the pinned guest kernels",
		Long: `Subcommands:
  build   fetch, check, configure, build and verify the pin's kernel unless it is
          cached; a cache hit is verified too. Prints the bzImage and what was checked.
  verify  check the cached kernel without building: the bzImage SHA-256 against
          kernel/bzimages.txt's row for this pin, fragment and toolchain (the
          key) and against build.txt, the config SHA-256 against build.txt,
          every required option, the header version string. A key with no row
          is "unrecorded": accepted with a warning, on build.txt's word.
  list    every pin, its source, and what the cache holds for it (and stale entries).
  path    print only the verified bzImage's path, building it if needed (for scripts).
  key     print the pin's content key (the cache directory's name; CI cache keys use it).
  fragment  print the configuration fragment as applied to the pin (overlays included).
  mirror  print the Debian archive URIs debian pins are fetched from, one a line:
          $LOCKSTEP_DEBIAN_MIRROR, else those of this machine's apt sources.
  pin     fetch a Debian kernel package and print its pin row, SHA-256s computed from
          what was fetched: --debian-source linux-source-X.Y[=VERSION] (a kernel we
          build) or --debian-image linux-image-…-amd64[=VERSION] (Debian's prebuilt
          kernel, booted with its own modules; a meta package such as linux-image-amd64
          is followed to its image), from --suite (default: this machine's). Put the row
          in a file named by $LOCKSTEP_PINS or --pins. The .deb stays in the cache.

Pins are in kernel/pins.txt; the configuration is tinyconfig plus kernel/fragment.config
(with kernel/fragment-X.Y.config overlays for X.Y and later).
The cache is $XDG_CACHE_HOME/lockstep/kernels (default ~/.cache/lockstep/kernels).
Progress goes to stderr every few seconds while fetching or building; -v also
prints every external command as a shell line.

Exit status: 0 ok (unrecorded included), 1 failed (fetch, hash, build, a fresh build
whose bzImage differs from its recorded row, or a refused cached kernel),
2 usage, 3 the configuration lacks required options (all are listed).`,
		Example: `# Build (or restore and verify) the default kernel
$ lockstep kernel build --pin 7.2.13
# Boot the verified kernel by hand
$ qemu-system-x86_64 -M microvm -kernel "$(lockstep kernel path)" -nographic -append console=ttyS0
# Show what is pinned and cached
$ lockstep kernel list
# The content key a CI cache entry is stored under
$ lockstep kernel key --pin 7.2.13
# Pin Debian 12's kernel without a new lockstep, and prove it
$ lockstep kernel pin --debian-image linux-image-amd64 --suite bookworm > debian.pins
$ LOCKSTEP_PINS=debian.pins lockstep selftest --kernel 6.1.0-57-amd64`,
		Flags: kernelFlags,
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

func kernelFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	o := &kernelOptions{}
	strictVar(fs, &o.pin, "pin", kernel.DefaultPin, "kernel `version` from kernel/pins.txt", wantPin)
	fs.StringVar(&o.cache, "cache", "", "cache `dir` (default $XDG_CACHE_HOME/lockstep/kernels)")
	fs.IntVar(&o.jobs, "jobs", 0, "make -j `n` (default: the number of CPUs)")
	pinsFlag(fs)
	fs.StringVar(&o.make.source, "debian-source", "", "pin: the linux-source-X.Y[=VERSION] `package` to pin")
	fs.StringVar(&o.make.image, "debian-image", "", "pin: the linux-image-…[=VERSION] `package` to pin (Debian's prebuilt kernel)")
	fs.StringVar(&o.make.suite, "suite", "", "pin: the Debian `suite` to fetch from (default: this machine's)")
	fs.StringVar(&o.make.name, "name", "", "pin: the pin's `name` (default: the kernel version, or an image's release)")
	fs.IntVar(&o.make.abi, "abi", 0, "pin: the Landlock `abi` the kernel offers (default: from its version, when known)")
	return func(ctx context.Context, io *stdio, args []string) int {
		v := verbs["kernel"]
		if len(args) == 0 {
			return usageExit(io, v, usagef("missing subcommand: want build, verify, list, path, key, fragment, mirror or pin"))
		}
		sub := args[0]
		// Flags may follow the subcommand: kernel build --pin 7.2.13.
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printVerbHelp(io.out, v)
				return exitOK
			}
			return usageExit(io, v, err)
		}
		if fs.NArg() > 0 {
			return usageExit(io, v, usagef("unexpected argument %q", fs.Arg(0)))
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
		return usageExit(io, v, usagef("unknown subcommand %q: want build, verify, list, path, key, fragment, mirror or pin", sub))
	}
}

// kernelExit maps a kernel package error to an exit status, printing it.
func kernelExit(io *stdio, err error) int {
	var be *kernel.BuildError
	if errors.As(err, &be) && be.Tail != "" {
		fmt.Fprintf(io.err, "lockstep kernel: last lines of %s:\n%s\n", be.Log, be.Tail)
	}
	var ve *kernel.VerifyError
	if errors.As(err, &ve) {
		// The message ends in the failed checks; say what happens next first.
		fmt.Fprintf(io.err, "lockstep kernel: the kernel in %s is not used; remove that directory to build it afresh\n", ve.Dir)
	}
	switch {
	case errors.Is(err, kernel.ErrUnfit):
		return fail(io, "kernel", exitIndeterminate, err)
	case errors.Is(err, kernel.ErrUnknownPin):
		return fail(io, "kernel", exitUsage, err)
	}
	return fail(io, "kernel", exitFail, err)
}

func kernelBuild(ctx context.Context, io *stdio, b *kernel.Builder, o *kernelOptions, pathOnly bool) int {
	r, err := b.Build(ctx, o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	if pathOnly {
		fmt.Fprintln(io.out, r.BzImage)
		return exitOK
	}
	how := "built"
	if r.CacheHit {
		how = "cache hit"
	}
	if r.Image != nil {
		return kernelImagePrint(io, r, how)
	}
	fmt.Fprintf(io.out, "kernel %s: %s\n", r.Pin.Version, r.BzImage)
	fmt.Fprintf(io.out, "  %s, verified in %s total: %s, config SHA-256 matches build.txt, %d required options present, header version %q\n",
		how, r.Elapsed.Round(time.Millisecond), bzImageCheck(r), r.Options, r.HeaderVersion)
	fmt.Fprintf(io.out, "  key %s, bzImage %d bytes, sha256 %s, Landlock ABI %d expected\n", r.Key, r.Record.BzImageSize, r.Record.BzImageSHA256, r.Pin.ABI)
	if r.NewRow != nil {
		fmt.Fprintf(io.out, "  unrecorded: %s has no row for this key; when a second build in an empty cache gives the same SHA-256, record it with:\n%s\n",
			kernel.BzImagesFile, r.NewRow.Row())
	}
	return exitOK
}

// bzImageCheck says what the bzImage's SHA-256 was checked against.
func bzImageCheck(r *kernel.Result) string {
	if r.Recorded != nil {
		return "bzImage SHA-256 matches " + r.Recorded.Where() + " (recorded for this pin, fragment and toolchain) and build.txt"
	}
	return "bzImage SHA-256 matches build.txt only (unrecorded: " + kernel.BzImagesFile + " has no row for this key)"
}

// kernelFragment prints the fragment as the pin's build applies it.
func kernelFragment(io *stdio, o *kernelOptions) int {
	pin, err := kernel.Lookup(o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	f, err := kernel.FragmentFor(pin.Version, kernel.Fragment())
	if err != nil {
		return kernelExit(io, err)
	}
	io.out.Write(f)
	return exitOK
}

// kernelKey prints the pin's content key: SHA-256 over the pin row, the
// fragment, the builder version and the toolchain versions.
func kernelKey(io *stdio, b *kernel.Builder, o *kernelOptions) int {
	pin, err := kernel.Lookup(o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	key, err := b.Key(pin)
	if err != nil {
		return kernelExit(io, err)
	}
	fmt.Fprintln(io.out, key)
	return exitOK
}

// kernelImagePrint reports a debian-image pin's entry: nothing was built.
func kernelImagePrint(io *stdio, r *kernel.Result, how string) int {
	if how == "built" {
		how = "unpacked"
	}
	fmt.Fprintf(io.out, "kernel %s: %s (Debian's image, with its modules in %s)\n", r.Pin.Version, r.BzImage, r.Image.Modules)
	fmt.Fprintf(io.out, "  %s, verified in %s: vmlinuz sha256 %s (the pin's inner-sha256), header version %q, %d module files recorded, Landlock ABI %d expected\n",
		how, r.Elapsed.Round(time.Millisecond), r.Pin.InnerSHA256, r.HeaderVersion, len(r.Image.Record.Modules), r.Pin.ABI)
	return exitOK
}

func kernelVerify(ctx context.Context, io *stdio, b *kernel.Builder, o *kernelOptions) int {
	r, err := b.Verify(ctx, o.pin)
	if err != nil {
		return kernelExit(io, err)
	}
	if r.Image != nil {
		return kernelImagePrint(io, r, "cache hit")
	}
	fmt.Fprintf(io.out, "kernel %s: verified %s in %s\n", r.Pin.Version, r.Dir, r.Elapsed.Round(time.Millisecond))
	if r.Recorded != nil {
		fmt.Fprintf(io.out, "  ok  bzImage sha256 %s (%s, recorded for this pin, fragment and toolchain; build.txt agrees)\n", r.Record.BzImageSHA256, r.Recorded.Where())
	} else {
		fmt.Fprintf(io.out, "  unrecorded  bzImage sha256 %s (build.txt only: %s has no row for key %s)\n", r.Record.BzImageSHA256, kernel.BzImagesFile, r.Key)
		fmt.Fprintf(io.err, "lockstep kernel: warning: kernel %s is unrecorded; it was checked against its own build.txt, which whoever wrote the cache entry also wrote\n", r.Pin.Version)
	}
	fmt.Fprintf(io.out, "  ok  config sha256 %s (build.txt)\n", r.Record.ConfigSHA256)
	fmt.Fprintf(io.out, "  ok  %d required options in config\n", r.Options)
	fmt.Fprintf(io.out, "  ok  header version %q starts with %s\n", r.HeaderVersion, r.Pin.Version)
	return exitOK
}

func kernelList(ctx context.Context, io *stdio, b *kernel.Builder) int {
	es, err := b.List(ctx)
	if err != nil {
		return kernelExit(io, err)
	}
	tw := tabwriter.NewWriter(io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PIN\tABI\tSOURCE\tFROM\tDOWNLOAD\tCACHE\tKEY")
	for _, e := range es {
		key := e.Key
		if len(key) > 16 {
			key = key[:16]
		}
		if e.Pin == nil {
			ver := "?"
			if e.Record != nil {
				ver = e.Record.Version
			}
			fmt.Fprintf(tw, "(%s)\t\t\t\t\t%s\t%s\n", ver, e.State, key)
			continue
		}
		state := e.State
		if e.Record != nil {
			state += fmt.Sprintf(" (%d bytes, built in %s)", e.Record.BzImageSize, e.Record.Duration)
		}
		if e.KeyErrMsg != "" {
			state += ": " + e.KeyErrMsg
		}
		src := e.Source
		if src == "" {
			src = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.Pin.Version, e.Pin.ABI, e.Pin.Describe(), e.Pin.Origin(), src, state, key)
	}
	tw.Flush()
	fmt.Fprintf(io.out, "cache: %s\n", cacheDirOf(b))
	return exitOK
}

// kernelPin prints the row kernel.MakePin computes.
func kernelPin(ctx context.Context, io *stdio, b *kernel.Builder, f kernelPinFlags) int {
	req := kernel.PinRequest{Suite: f.suite, Name: f.name, ABI: f.abi}
	switch {
	case (f.source == "") == (f.image == ""):
		return usageExit(io, verbs["kernel"], usagef("kernel pin: give one of --debian-source linux-source-X.Y[=VERSION] or --debian-image linux-image-…[=VERSION]"))
	case f.source != "":
		req.Source = kernel.SourceDebian
		req.Package, req.Version, _ = strings.Cut(f.source, "=")
	default:
		req.Source = kernel.SourceDebianImage
		req.Package, req.Version, _ = strings.Cut(f.image, "=")
	}
	if f.abi < 0 {
		return usageExit(io, verbs["kernel"], usagef("--abi %d: want a Landlock ABI of 1 or more", f.abi))
	}
	p, err := b.MakePin(ctx, req)
	if err != nil {
		return kernelExit(io, err)
	}
	fmt.Fprintf(io.err, "lockstep kernel: %s=%s (%s) fetched into %s\n", p.Package, p.PackageVersion, p.Suite, p.Deb)
	fmt.Fprintln(io.out, p.Row)
	return exitOK
}

func kernelMirror(io *stdio) int {
	uris, err := kernel.DebianURIs()
	if err != nil {
		return fail(io, "kernel", exitFail, err)
	}
	for _, u := range uris {
		fmt.Fprintln(io.out, u)
	}
	return exitOK
}

// pinsFlag is --pins on every verb that takes a kernel: a pin file whose
// rows join the shipped pins (as $LOCKSTEP_PINS does), read as the flag is
// parsed so that a bad row is a usage error.
func pinsFlag(fs *flag.FlagSet) {
	fs.Func("pins", "pin `file` whose rows (kernel/pins.txt's grammar) join the shipped pins, as $"+kernel.PinsEnv+" does", kernel.UsePinsFile)
}

func cacheDirOf(b *kernel.Builder) string {
	if b.CacheDir != "" {
		return b.CacheDir
	}
	return kernel.DefaultCacheDir()
}

// kernelLogger shows progress (a build takes minutes, so always) and, with
// -v, every external command.
func kernelLogger(io *stdio) *slog.Logger {
	// The kernel package's messages name their stage ("kernel: compiling").
	return cli.Logger(io.err, "lockstep ", cli.Level(slog.LevelInfo, false, io.verbose))
}
