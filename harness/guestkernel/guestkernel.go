package guestkernel

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// Kernel is a --kernel resolved: the bzImage to boot and, for a
// debian-image pin, its modules and machine.
type Kernel struct {
	BzImage string
	Boot    harness.Boot
	// Pin is the pin the value names ("" for none) and ABI its Landlock
	// ABI.
	Pin string
	ABI int
}

// named is g with the pin arg names, if it names one.
func (g Kernel) named(arg string) Kernel {
	if p, err := kernel.Lookup(arg); err == nil {
		g.Pin, g.ABI = arg, p.ABI
	}
	return g
}

// Resolve takes a bzImage file as is and builds, unpacks or restores a
// pin. A debian-image pin boots on q35 with the modules a guest needs
// (harness.GuestModules, plus extra) from its own package, each checked
// against the SHA-256 recorded when the package was unpacked.
func Resolve(ctx context.Context, arg string, log *slog.Logger, extra ...string) (Kernel, error) {
	if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		return Kernel{BzImage: arg}.named(arg), nil
	}
	if strings.ContainsRune(arg, '/') {
		return Kernel{}, fmt.Errorf("kernel file %s: not found", arg)
	}
	r, err := (&kernel.Builder{Log: log}).Build(ctx, arg)
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel %s: %w", arg, err)
	}
	g := Kernel{BzImage: r.BzImage}.named(arg)
	if r.Image == nil {
		return g, nil
	}
	mods, err := harness.ResolveModules(r.Image.Modules, append(slices.Clip(harness.GuestModules), extra...))
	if err == nil {
		err = r.Image.CheckModules(mods)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel %s: %w", arg, err)
	}
	g.Boot = harness.Boot{Modules: mods, Machine: harness.MachineQ35}
	return g, nil
}

// ResolveBuiltIn is Resolve for the verbs that boot only kernels with
// everything built in (probe --boot, record): the bzImage.
func ResolveBuiltIn(ctx context.Context, arg string, log *slog.Logger) (string, error) {
	g, err := Resolve(ctx, arg, log)
	if err == nil && g.Boot.Modules != nil {
		err = fmt.Errorf("kernel %s is Debian's image, with modules; this verb boots pins built here or bzImage files", arg)
	}
	return g.BzImage, err
}

// Modules are the modules a distribution kernel's guest loads from dir,
// none when dir is "".
func Modules(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	return harness.ResolveModules(dir, harness.GuestModules)
}

// PinABI is the pin's Landlock ABI; a kernel file is held to the default
// pin's.
func PinABI(arg string) (int, error) {
	pin := arg
	if strings.ContainsRune(arg, '/') {
		pin = kernel.DefaultPin
	} else if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		pin = kernel.DefaultPin
	}
	p, err := kernel.Lookup(pin)
	if err != nil {
		return 0, err
	}
	return p.ABI, nil
}

// Release is the release (first word of the version string) that a
// bzImage's setup header names: what uname -r must say in the guest.
func Release(bz string) (string, error) {
	f, err := safefile.Open(bz)
	if err != nil {
		return "", fmt.Errorf("kernel release: %w", err)
	}
	defer f.Close()
	v, err := kernel.HeaderVersion(f)
	if err != nil {
		return "", fmt.Errorf("kernel release of %s: %w", bz, err)
	}
	release, _, _ := strings.Cut(v, " ")
	return release, nil
}
