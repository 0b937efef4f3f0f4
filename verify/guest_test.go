//go:build linux

package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"

	"github.com/lockstep-sandbox/lockstep/kernel"
)

// TestVerifyGuest runs `lockstep verify` on the default pin, twice as two
// kernel rows (the pin and its bzImage file), over a sound exercise and the
// one broken on purpose: the matrix is pass / fail on both rows, the fail
// names the refused write into /srv with its audit record, exit 1.
func TestVerifyGuest(t *testing.T) {
	needHostKernel(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	bz, err := guesttest.PinnedKernel()
	if err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lockstepBinary(t), "verify", "--json", "--base", "BaseLanguage-generic.cfg", "--kernel", kernel.DefaultPin,
		"--kernel", bz, "--exercises", "exercises", "--exercise", "counting", "--exercise", "writes-outside", "--boot-timeout", "10m",
		"--mem", "2048") // room for the mem_mb=1024 check's unsandboxed control
	cmd.Dir = "testdata"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lockstep verify: %v\n%s", err, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("lockstep verify (exit %d) printed no result: %v\n%s", code, err, errb.String())
	}
	for _, c := range res.Cells {
		if c.Verdict == Indeterminate {
			// What the guest's console said last: the cause of a cell
			// that never came (an OOM kill, a panic) is only there.
			t.Errorf("%s × %s = indeterminate (%s); the guest console's last lines:\n%s\nlockstep verify's stderr (the guests' progress):\n%s",
				c.Kernel, c.Exercise, c.Why, strings.Join(c.Console, "\n"), errb.String())
		}
	}
	if code != 1 || res.Status != StatusFail || len(res.Cells) != 4 {
		t.Fatalf("verify = exit %d, status %d, %d cells; want exit 1 over 2×2 cells\n%s", code, res.Status, len(res.Cells), out.String())
	}
	for k := range res.Kernels {
		if c := res.Cell(k, 0); c.Verdict != Pass {
			t.Errorf("%s × %s = %s (%s), want pass", c.Kernel, c.Exercise, c.Verdict, c.Why)
		} else {
			// The limits hold in the guest too; nproc through the cgroup
			// v2 PID 1 mounts (the guest's root is not bound by RLIMIT_NPROC).
			for _, ch := range c.Containment {
				if !ch.Held {
					t.Errorf("%s × %s: containment %s did not hold (skipped %v): %s", c.Kernel, c.Exercise, ch.Name, ch.Skipped, ch.Detail)
				}
			}
		}
		c := res.Cell(k, 1)
		if c.Verdict != Fail || !strings.Contains(c.Why, "/srv") || c.Diagnosis == nil || !c.Diagnosis.Audit {
			t.Errorf("%s × %s = %s (%s), want fail naming /srv with audit records", c.Kernel, c.Exercise, c.Verdict, c.Why)
		}
		if c.Guest == nil || c.Guest.BzImageSHA256 == "" || c.ABI != 10 {
			t.Errorf("%s × %s: guest %+v, ABI %d; want provenance and ABI 10", c.Kernel, c.Exercise, c.Guest, c.ABI)
		}
	}
	t.Logf("wall %.1f s, the guests' own %.1f s", res.WallSeconds, res.GuestSeconds)
}

// TestVerifyGuestForgedReference runs `lockstep verify` over
// forges-reference, an attack fixture: the tests of writes-outside, whose
// build script, run as root with no sandbox (the reference run), renames a
// wrapper over the guest's lockstep binary (so the joint runs would run
// unsandboxed and agree) and leaves a setsid daemon that rewrites a failing
// cell to a pass. The reference run is isolated, so the cell fails as
// writes-outside's does, naming /srv; it must never pass.
func TestVerifyGuestForgedReference(t *testing.T) {
	needHostKernel(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	if _, err := guesttest.PinnedKernel(); err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lockstepBinary(t), "verify", "--json", "--base", "BaseLanguage-generic.cfg", "--kernel", kernel.DefaultPin,
		"--exercises", "exercises", "--exercise", "forges-reference", "--boot-timeout", "10m", "--mem", "2048")
	cmd.Dir = "testdata"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("lockstep verify: %v\n%s", err, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Cells) != 1 {
		t.Fatalf("lockstep verify printed no one-cell result: %v\n%s\n%s", err, out.String(), errb.String())
	}
	c := res.Cells[0]
	t.Logf("%s × %s = %s (%s)", c.Kernel, c.Exercise, c.Verdict, c.Why)
	if c.Verdict != Fail || !strings.Contains(c.Why, "/srv") {
		t.Errorf("%s × %s = %s (%s); want fail naming /srv, as writes-outside\nthe guests' progress:\n%s",
			c.Kernel, c.Exercise, c.Verdict, c.Why, errb.String())
	}
}
