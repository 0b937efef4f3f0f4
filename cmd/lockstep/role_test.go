package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/pruneguest"
	"github.com/lockstep-sandbox/lockstep/repro"
	"github.com/lockstep-sandbox/lockstep/selftest"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// TestRoleFromOutside runs the real binary with LOCKSTEP_ROLE exported by
// its caller, as a shell would: each hidden role says what it is and what
// went wrong, and exits 2 (usage), where the enforcer's child exited 125 in
// silence and an unknown value was ignored.
func TestRoleFromOutside(t *testing.T) {
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "f.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ Role, Err string }{
		{"enforcer-child", "LOCKSTEP_ROLE=enforcer-child is set, but this process was not started by lockstep run"},
		{"proof-refusal", "LOCKSTEP_ROLE=proof-refusal is set, but this process was not started by lockstep selftest"},
		{"bogus", `LOCKSTEP_ROLE="bogus" names no role`},
		// The workloads' guest sides: the job a guest is booted with.
		{observer.GuestRole, "LOCKSTEP_ROLE=observe-guest is set, but this is not a lockstep guest"},
		{repro.GuestRole, "LOCKSTEP_ROLE=repro-guest is set, but this is not a lockstep guest"},
		{verify.GuestRole, "LOCKSTEP_ROLE=verify-guest is set, but this is not a lockstep guest"},
		{pruneguest.GuestRole, "LOCKSTEP_ROLE=prune-guest is set, but this is not a lockstep guest"},
		{selftest.GuestRole, "LOCKSTEP_ROLE=selftest-guest is set, but this is not a lockstep guest"},
	} {
		t.Run(tc.Role, func(t *testing.T) {
			code, out, errs := runBin(t, bin, []string{"LOCKSTEP_ROLE=" + tc.Role}, "policy", "check", cfg)
			if code != cli.ExitUsage || !strings.Contains(errs, tc.Err) || !strings.Contains(errs, "unset LOCKSTEP_ROLE") || out != "" {
				t.Errorf("LOCKSTEP_ROLE=%s lockstep policy check = %d\nstdout %q\nstderr %q\nwant 2 and a message with %q", tc.Role, code, out, errs, tc.Err)
			}
		})
	}
	// The re-executed child, started by run itself, still works.
	limited := filepath.Join(t.TempDir(), "limited.cfg")
	if err := os.WriteFile(limited, []byte(truePolicy+"[limits]\nnofile=64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runBin(t, bin, nil, "run", "-q", "--config", limited, "--", "echo", "ran"); code != 0 || out != "ran\n" {
		t.Errorf("run through the re-executed child = %d, %q, %q; want 0 and ran", code, out, errs)
	}
}

// TestRoleVariable: the guest's job names its role in the variable the
// binary dispatches on, the one its re-executed children use.
func TestRoleVariable(t *testing.T) {
	if proto.EnvRole != enforcer.RoleEnv || roleEnv != enforcer.RoleEnv {
		t.Errorf("proto.EnvRole %q, roleEnv %q, enforcer.RoleEnv %q: one variable selects every role", proto.EnvRole, roleEnv, enforcer.RoleEnv)
	}
}
