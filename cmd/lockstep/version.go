package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/version"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// goLandlock is go-landlock's module path, looked up in the build's
// dependencies.
const goLandlock = "github.com/landlock-lsm/go-landlock"

func init() {
	verbs.Register(&cli.Verb{
		Name:    "version",
		Usage:   "version [--json]",
		Short:   "which lockstep this is: version, revision, Go, kernel pins and fragment, Landlock ABI",
		Long:    help("version", nil),
		Example: example("version"),
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
			asJSON := fs.Bool("json", false, "print one JSON document instead of the lines")
			return func(_ context.Context, io *cli.Stdio, args []string) int {
				if len(args) > 0 {
					return cli.UsageExit(io, verbs["version"], cli.Usagef("unexpected argument %q", args[0]))
				}
				return printVersion(io, *asJSON)
			}
		},
	})
}

// versionInfo is `lockstep version --json`.
type versionInfo struct {
	Version        string       `json:"version"`
	Module         string       `json:"module"`
	Revision       string       `json:"revision"`
	Modified       bool         `json:"modified"`
	Go             string       `json:"go"`
	Platform       string       `json:"platform"`
	PinsSHA256     string       `json:"pins_sha256"`
	FragmentSHA256 string       `json:"fragment_sha256"`
	DefaultPin     string       `json:"default_pin"`
	Pins           []pinVersion `json:"pins"`
	LandlockABI    int          `json:"landlock_abi"`
	GoLandlock     string       `json:"go_landlock"`
}

// pinVersion is one kernel pin as `lockstep version` reports it.
type pinVersion struct {
	Version        string `json:"version"`
	ABI            int    `json:"abi"`
	FragmentSHA256 string `json:"fragment_sha256"`
}

func readVersion() (versionInfo, error) {
	b := version.Read()
	v := versionInfo{
		Version: b.String(), Module: b.Module, Revision: b.Revision, Modified: b.Modified,
		Go: b.Go, Platform: runtime.GOOS + "/" + runtime.GOARCH,
		PinsSHA256: kernel.PinsSHA256(), FragmentSHA256: kernel.FragmentSHA256(),
		DefaultPin: kernel.DefaultPin, LandlockABI: len(landlock.ABITable) - 1,
		GoLandlock: b.Deps[goLandlock],
	}
	for _, p := range kernel.Pins() {
		frag, err := kernel.FragmentFor(p.Version, kernel.Fragment())
		if err != nil {
			return v, fmt.Errorf("pin %s: %w", p.Version, err)
		}
		sum := sha256.Sum256(frag)
		v.Pins = append(v.Pins, pinVersion{Version: p.Version, ABI: p.ABI, FragmentSHA256: hex.EncodeToString(sum[:])})
	}
	return v, nil
}

func printVersion(io *cli.Stdio, asJSON bool) int {
	v, err := readVersion()
	if err != nil {
		return cli.Fail(io, "version", cli.ExitFail, err)
	}
	if asJSON {
		enc := json.NewEncoder(io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return cli.Fail(io, "version", cli.ExitFail, err)
		}
		return cli.ExitOK
	}
	writeVersion(io.Out, v)
	return cli.ExitOK
}

func writeVersion(w io.Writer, v versionInfo) {
	fmt.Fprintf(w, "lockstep %s\n", v.Version)
	rev := v.Revision
	switch {
	case rev == "":
		rev = "unknown (built without VCS information)"
	case v.Modified:
		rev += " (modified)"
	}
	fmt.Fprintf(w, "  revision  %s\n", rev)
	fmt.Fprintf(w, "  go        %s %s\n", v.Go, v.Platform)
	fmt.Fprintf(w, "  pins      sha256:%s (%s)\n", v.PinsSHA256, kernel.PinsFile)
	fmt.Fprintf(w, "  fragment  sha256:%s (kernel/fragment.config)\n", v.FragmentSHA256)
	for _, p := range v.Pins {
		def := ""
		if p.Version == v.DefaultPin {
			def = ", default"
		}
		fmt.Fprintf(w, "  kernel    %-9s ABI %d, fragment sha256:%s%s\n", p.Version, p.ABI, p.FragmentSHA256, def)
	}
	gl := v.GoLandlock
	if gl == "" {
		gl = "unknown"
	}
	fmt.Fprintf(w, "  landlock  ABI 1-%d, go-landlock %s\n", v.LandlockABI, gl)
}
