package kernel

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The plain-text forms below are what `lockstep kernel` prints: a built
// or verified kernel and what was checked of it, and the cache's list.

// WriteBuilt writes a Build's result: the bzImage, what was checked and,
// for a kernel whose key has no row yet, the row to record.
func WriteBuilt(w io.Writer, r *Result) {
	how := "built"
	if r.CacheHit {
		how = "cache hit"
	}
	if r.Image != nil {
		writeImage(w, r, how)
		return
	}
	fmt.Fprintf(w, "kernel %s: %s\n", r.Pin.Version, r.BzImage)
	fmt.Fprintf(w, "  %s, verified in %s total: %s, config SHA-256 matches build.txt, %d required options present, header version %q\n",
		how, r.Elapsed.Round(time.Millisecond), bzImageCheck(r), r.Options, r.HeaderVersion)
	fmt.Fprintf(w, "  key %s, bzImage %d bytes, sha256 %s, Landlock ABI %d expected\n", r.Key, r.Record.BzImageSize, r.Record.BzImageSHA256, r.Pin.ABI)
	if r.NewRow != nil {
		fmt.Fprintf(w, "  unrecorded: %s has no row for this key; when a second build in an empty cache gives the same SHA-256, record it with:\n%s\n",
			BzImagesFile, r.NewRow.Row())
	}
}

// bzImageCheck says what the bzImage's SHA-256 was checked against.
func bzImageCheck(r *Result) string {
	if r.Recorded != nil {
		return "bzImage SHA-256 matches " + r.Recorded.Where() + " (recorded for this pin, fragment and toolchain) and build.txt"
	}
	return "bzImage SHA-256 matches build.txt only (unrecorded: " + BzImagesFile + " has no row for this key)"
}

// writeImage writes a debian-image pin's entry: nothing was built.
func writeImage(w io.Writer, r *Result, how string) {
	if how == "built" {
		how = "unpacked"
	}
	fmt.Fprintf(w, "kernel %s: %s (Debian's image, with its modules in %s)\n", r.Pin.Version, r.BzImage, r.Image.Modules)
	fmt.Fprintf(w, "  %s, verified in %s: vmlinuz sha256 %s (the pin's inner-sha256), header version %q, %d module files recorded, Landlock ABI %d expected\n",
		how, r.Elapsed.Round(time.Millisecond), r.Pin.InnerSHA256, r.HeaderVersion, len(r.Image.Record.Modules), r.Pin.ABI)
}

// WriteVerified writes a Verify's result, each check on its line; an
// unrecorded kernel's warning goes to warn.
func WriteVerified(w, warn io.Writer, r *Result) {
	if r.Image != nil {
		writeImage(w, r, "cache hit")
		return
	}
	fmt.Fprintf(w, "kernel %s: verified %s in %s\n", r.Pin.Version, r.Dir, r.Elapsed.Round(time.Millisecond))
	if r.Recorded != nil {
		fmt.Fprintf(w, "  ok  bzImage sha256 %s (%s, recorded for this pin, fragment and toolchain; build.txt agrees)\n", r.Record.BzImageSHA256, r.Recorded.Where())
	} else {
		fmt.Fprintf(w, "  unrecorded  bzImage sha256 %s (build.txt only: %s has no row for key %s)\n", r.Record.BzImageSHA256, BzImagesFile, r.Key)
		fmt.Fprintf(warn, "lockstep kernel: warning: kernel %s is unrecorded; it was checked against its own build.txt, which whoever wrote the cache entry also wrote\n", r.Pin.Version)
	}
	fmt.Fprintf(w, "  ok  config sha256 %s (build.txt)\n", r.Record.ConfigSHA256)
	fmt.Fprintf(w, "  ok  %d required options in config\n", r.Options)
	fmt.Fprintf(w, "  ok  header version %q starts with %s\n", r.HeaderVersion, r.Pin.Version)
}

// WriteList writes List's entries as a table, then the cache directory.
func WriteList(w io.Writer, es []Entry, cacheDir string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
	fmt.Fprintf(w, "cache: %s\n", cacheDir)
}

// WriteErrorDetail writes what an error of Build or Verify carries beyond
// its message: a failed build's last log lines, and for a cached kernel
// refused what happens next (the message ends in the failed checks).
func WriteErrorDetail(w io.Writer, err error) {
	var be *BuildError
	if errors.As(err, &be) && be.Tail != "" {
		fmt.Fprintf(w, "lockstep kernel: last lines of %s:\n%s\n", be.Log, be.Tail)
	}
	var ve *VerifyError
	if errors.As(err, &ve) {
		fmt.Fprintf(w, "lockstep kernel: the kernel in %s is not used; remove that directory to build it afresh\n", ve.Dir)
	}
}

// Cache is the cache directory b uses: CacheDir, else DefaultCacheDir.
func (b *Builder) Cache() string {
	if b.CacheDir != "" {
		return b.CacheDir
	}
	return DefaultCacheDir()
}

// PinNames are the versions of every pin, the shipped ones and those of
// pin files, comma-separated (the shipped ones alone when a pin file
// cannot be read): what a flag naming a pin takes.
func PinNames() string {
	var vs []string
	all, err := AllPins()
	if err != nil {
		all = Pins()
	}
	for _, p := range all {
		vs = append(vs, p.Version)
	}
	return strings.Join(vs, ", ")
}
