package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func init() {
	verbs.Register(&cli.Verb{
		Name:    "probe",
		Usage:   "probe [--json] [--boot] [--kernel <pin|file>]",
		Short:   "show what this machine offers: Landlock ABI, LSMs, audit, KVM, QEMU, strace, cgroups, ptrace",
		Long:    help("probe", probeHelp()),
		Example: example("probe"),
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
			asJSON := fs.Bool("json", false, "print one JSON document (docs/probe.md) instead of the table")
			boot := fs.Bool("boot", false, "measure whether KVM is usable by booting the pinned kernel under it (cached)")
			kernelArg := cli.StrictString(fs, "kernel", kernel.DefaultPin, "with --boot: the kernel `pin` or bzImage file to boot", wantKernel)
			pinsFlag(fs)
			return func(ctx context.Context, io *cli.Stdio, args []string) int {
				if len(args) > 0 {
					return cli.UsageExit(io, verbs["probe"], cli.Usagef("unexpected argument %q", args[0]))
				}
				f := probeFacts(ctx)
				if err := probeAccel(ctx, io, f, *boot, *kernelArg); err != nil {
					return cli.Fail(io, "probe", cli.ExitIndeterminate, err)
				}
				if *asJSON {
					enc := json.NewEncoder(io.Out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(f); err != nil {
						return cli.Fail(io, "probe", cli.ExitFail, err)
					}
					return cli.ExitOK
				}
				f.WriteText(io.Out)
				return cli.ExitOK
			}
		},
	})
}

func probeFacts(ctx context.Context) *machine.Facts {
	f := machine.Probe(ctx)
	f.Cgroup.EnforcerCaps = enforcer.CgroupCaps()
	if f.Landlock.Error == "" {
		for _, g := range landlock.Unrestricted(f.Landlock.ABI) {
			f.Landlock.Unrestricted = append(f.Landlock.Unrestricted, g.Name)
		}
	}
	return f
}

// probeAccel fills the KVM verdict: from the harness's cache, or by booting
// the kernel under KVM when boot is set.
func probeAccel(ctx context.Context, io *cli.Stdio, f *machine.Facts, boot bool, kernelArg string) error {
	var v harness.Verdict
	if boot {
		bz, err := guestkernel.ResolveBuiltIn(ctx, kernelArg, io.GuestLog("probe"))
		if err != nil {
			return fmt.Errorf("kernel for the KVM probe: %w", err)
		}
		if v, err = harness.ProbeAccel(ctx, bz, io.GuestLog("probe")); err != nil {
			return fmt.Errorf("KVM probe: %w", err)
		}
	} else {
		cached, ok, err := harness.CachedAccel()
		switch {
		case err != nil:
			f.KVM.UsableReason = "no cached verdict: " + err.Error()
			return nil
		case !ok:
			return nil
		}
		v = cached
	}
	f.KVM.Usable, f.KVM.UsableReason = "unusable", v.Reason
	if v.KVMUsable {
		f.KVM.Usable = "usable"
	}
	f.KVM.ProbedAt = v.ProbedAt.UTC().Format(time.RFC3339)
	f.KVM.CPU, f.KVM.CPUReason = v.CPU, v.CPUReason
	return nil
}
