package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func init() {
	register(&verb{
		Name:  "probe",
		Usage: "probe [--json] [--boot] [--kernel <pin|file>]",
		Short: "show what this machine offers: Landlock ABI, LSMs, audit, KVM, QEMU, strace, cgroups, ptrace",
		Long: `Reads, and changes nothing (it creates and removes one empty cgroup to see
which caps 'lockstep run' would use). /dev/kvm is reported as present or
not, with the harness's verdict on whether KVM is usable: that is found only
by booting a guest under KVM, cached per (host kernel release, QEMU version).
Without --boot the cached verdict is shown ("unknown" if none); --boot boots
the pinned kernel under KVM now (with a TCG control boot) and caches it.
With --json, stdout is one document whose schema docs/probe.md documents
(schema_version ` + fmt.Sprint(machine.SchemaVersion) + `). A fact that could not be read has its "error" set;
it is unknown, never "no".`,
		Example: `# what this machine offers
$ lockstep probe
# the same for a program
$ lockstep probe --json
# find out now whether KVM can run a guest here (boots the pinned kernel)
$ lockstep probe --boot`,
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
			asJSON := fs.Bool("json", false, "print one JSON document (docs/probe.md) instead of the table")
			boot := fs.Bool("boot", false, "measure whether KVM is usable by booting the pinned kernel under it (cached)")
			kernelArg := strictString(fs, "kernel", kernel.DefaultPin, "with --boot: the kernel `pin` or bzImage file to boot", wantKernel)
			pinsFlag(fs)
			return func(ctx context.Context, io *stdio, args []string) int {
				if len(args) > 0 {
					return usageExit(io, verbs["probe"], usagef("unexpected argument %q", args[0]))
				}
				f := probeFacts(ctx)
				if err := probeAccel(ctx, io, f, *boot, *kernelArg); err != nil {
					return fail(io, "probe", exitIndeterminate, err)
				}
				if *asJSON {
					enc := json.NewEncoder(io.out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(f); err != nil {
						return fail(io, "probe", exitFail, err)
					}
					return exitOK
				}
				printFacts(io.out, f)
				return exitOK
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
func probeAccel(ctx context.Context, io *stdio, f *machine.Facts, boot bool, kernelArg string) error {
	var v harness.Verdict
	if boot {
		bz, err := resolveKernel(ctx, kernelArg, guestLogger(io, "probe"))
		if err != nil {
			return fmt.Errorf("kernel for the KVM probe: %w", err)
		}
		if v, err = harness.ProbeAccel(ctx, bz, guestLogger(io, "probe")); err != nil {
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

// gapsText says what ABI abi cannot restrict at all, each gap with what
// goes unrestricted and the ABI that closes it ("" for none).
func gapsText(abi int) string {
	var parts []string
	for _, g := range landlock.Unrestricted(abi) {
		parts = append(parts, fmt.Sprintf("%s (%s; ABI %d+)", g.Name, g.What, g.Since()))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; this ABI cannot restrict: " + strings.Join(parts, ", ")
}

func orUnknown(s, err string) string {
	if err != "" {
		return "unknown (" + err + ")"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printFacts(w io.Writer, f *machine.Facts) {
	row := func(k, v string) { fmt.Fprintf(w, "%-10s %s\n", k, v) }
	row("kernel", f.Kernel.Release+" "+f.Kernel.Machine)
	if f.Landlock.Error != "" {
		row("landlock", "unavailable: "+f.Landlock.Error)
	} else {
		row("landlock", fmt.Sprintf("ABI %d, errata %#x %v%s", f.Landlock.ABI, f.Landlock.Errata, f.Landlock.ErrataBits, gapsText(f.Landlock.ABI)))
	}
	if f.LSM.Readable {
		row("lsm", strings.Join(f.LSM.List, ",")+" (landlock listed: "+yesNo(f.LSM.Landlock)+")")
	} else {
		row("lsm", "unknown ("+f.LSM.Error+")")
	}
	if f.Audit.Available {
		daemon := "none"
		if f.Audit.DaemonPID != 0 {
			daemon = fmt.Sprint("pid ", f.Audit.DaemonPID)
		}
		reg := "yes"
		if !f.Audit.CanRegister {
			reg = "no: " + f.Audit.RegisterReason
		}
		row("audit", fmt.Sprintf("enabled=%d backlog=%d/%d lost=%d rate_limit=%d daemon=%s; this process may register as audit daemon: %s",
			f.Audit.Enabled, f.Audit.Backlog, f.Audit.BacklogLimit, f.Audit.Lost, f.Audit.RateLimit, daemon, reg))
	} else {
		row("audit", "unknown ("+f.Audit.Error+")")
	}
	kvm := "/dev/kvm absent"
	if f.KVM.Present {
		kvm = "/dev/kvm present (char device: " + yesNo(f.KVM.CharDevice) + "); KVM " + f.KVM.Usable
		if f.KVM.ProbedAt != "" {
			kvm += " (booted " + f.KVM.ProbedAt + ")"
		}
		if f.KVM.CPU != "" {
			kvm += " with -cpu " + f.KVM.CPU
		}
		if f.KVM.CPUReason != "" {
			kvm += " (" + f.KVM.CPUReason + ")"
		}
		if f.KVM.UsableReason != "" {
			kvm += ": " + f.KVM.UsableReason
		}
	}
	row("kvm", orUnknown(kvm, f.KVM.Error))
	row("qemu", orUnknown(f.QEMU.Version+" ("+f.QEMU.Path+")", f.QEMU.Error))
	row("strace", orUnknown(f.Strace.Version+" ("+f.Strace.Path+")", f.Strace.Error))
	cg := fmt.Sprintf("%s is %s", f.Cgroup.Root, f.Cgroup.RootType)
	if f.Cgroup.V2Path != "" {
		cg += fmt.Sprintf("; cgroup2 at %s (writable: %s, controllers: %s)", f.Cgroup.V2Path, yesNo(f.Cgroup.V2Writable), strings.Join(f.Cgroup.Controllers, ","))
	}
	cg += fmt.Sprintf("; v1 pids: %s, v1 memory: %s; caps for lockstep run: %s", yesNo(f.Cgroup.V1Pids), yesNo(f.Cgroup.V1Memory), f.Cgroup.EnforcerCaps)
	row("cgroup", orUnknown(cg, f.Cgroup.Error))
	pt := "kernel.yama.ptrace_scope absent (Yama not enabled)"
	if f.Ptrace.YamaScope >= 0 {
		pt = fmt.Sprintf("kernel.yama.ptrace_scope=%d", f.Ptrace.YamaScope)
	}
	row("ptrace", orUnknown(pt, f.Ptrace.Error))
}
