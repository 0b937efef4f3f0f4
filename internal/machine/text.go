package machine

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockstep-sandbox/lockstep/landlock"
)

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

// WriteText writes the facts as `lockstep probe` prints them: a line per
// fact, a fact that could not be read as unknown with why.
func (f *Facts) WriteText(w io.Writer) {
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
