package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// TestProbeVerb: `lockstep probe --json` prints exactly one document with the
// schema version and the field the verb fills itself; the table names every
// fact.
func TestProbeVerb(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"probe", "--json"}, &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitOK {
		t.Fatalf("probe --json = %d, stderr %s", code, errb.String())
	}
	dec := json.NewDecoder(&out)
	var f machine.Facts
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("probe --json: %v", err)
	}
	if dec.More() {
		t.Error("probe --json printed more than one document")
	}
	if f.SchemaVersion != machine.SchemaVersion || f.Cgroup.EnforcerCaps == "" {
		t.Errorf("schema_version %d, enforcer_caps %q; want %d and a value", f.SchemaVersion, f.Cgroup.EnforcerCaps, machine.SchemaVersion)
	}
	gaps := landlock.GapNames(landlock.Unrestricted(f.Landlock.ABI))
	if got := strings.Join(f.Landlock.Unrestricted, ","); got != gaps {
		t.Errorf("landlock.unrestricted = %q, want %q (ABI %d)", got, gaps, f.Landlock.ABI)
	}
	out.Reset()
	if code := run(t.Context(), []string{"probe"}, &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitOK {
		t.Fatalf("probe = %d", code)
	}
	for _, g := range landlock.Unrestricted(f.Landlock.ABI) {
		if !strings.Contains(out.String(), fmt.Sprintf("%s (%s; ABI %d+)", g.Name, g.What, g.Since())) {
			t.Errorf("probe table does not say ABI %d leaves %s unrestricted:\n%s", f.Landlock.ABI, g.Name, out.String())
		}
	}
	for _, k := range []string{"kernel", "landlock", "lsm", "audit", "kvm", "qemu", "strace", "cgroup", "ptrace"} {
		if !strings.Contains(out.String(), "\n"+k+" ") && !strings.HasPrefix(out.String(), k+" ") {
			t.Errorf("probe table lacks a %q row:\n%s", k, out.String())
		}
	}
	if code := run(t.Context(), []string{"probe", "extra"}, &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitUsage {
		t.Errorf("probe extra = %d, want %d", code, cli.ExitUsage)
	}
}

// TestProbeBootKVMVerdict: --boot really boots the pinned kernel under KVM
// and answers usable or unusable (never unknown), and the plain probe shows
// the same cached verdict afterwards. On this kind of machine /dev/kvm exists
// but cannot run a guest; on a GitHub runner it can.
func TestProbeBootKVMVerdict(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	probe := func(args ...string) machine.Facts {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(t.Context(), append([]string{"probe", "--json"}, args...), &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitOK {
			t.Fatalf("probe --json %v = %d, stderr %s", args, code, errb.String())
		}
		var f machine.Facts
		if err := json.Unmarshal(out.Bytes(), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	booted := probe("--boot")
	if booted.KVM.Usable != "usable" && booted.KVM.Usable != "unusable" {
		t.Fatalf("probe --boot: kvm.usable = %q, want usable or unusable", booted.KVM.Usable)
	}
	if booted.KVM.Usable == "unusable" && booted.KVM.UsableReason == "" {
		t.Error("probe --boot: unusable without a reason")
	}
	if (booted.KVM.Usable == "usable") != (booted.KVM.CPU != "") {
		t.Errorf("probe --boot: kvm.usable %q with cpu %q: want a CPU model exactly when usable", booted.KVM.Usable, booted.KVM.CPU)
	}
	if cached := probe(); cached.KVM.Usable != booted.KVM.Usable || cached.KVM.ProbedAt != booted.KVM.ProbedAt || cached.KVM.CPU != booted.KVM.CPU {
		t.Errorf("probe after --boot: %q at %q on %q, want the cached %q at %q on %q", cached.KVM.Usable, cached.KVM.ProbedAt, cached.KVM.CPU,
			booted.KVM.Usable, booted.KVM.ProbedAt, booted.KVM.CPU)
	}
}
