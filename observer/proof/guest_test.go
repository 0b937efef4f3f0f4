//go:build linux

package proof

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/kernel"
)

// TestSelftestGuest is `lockstep selftest` end to end on the 7.2.13 pin: a
// guest boots, every check holds (release, LSM, ABI 10, audit, all 16
// refusals, none "not offered"), status 0, and the host's JSON agrees with
// the guest's selftest.json.
func TestSelftestGuest(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	if _, err := guesttest.PinnedKernel(); err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	bin := lockstepbin.Build(t)
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "selftest", "--json", "--results", results)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep Report
	if jerr := json.Unmarshal(stdout.Bytes(), &rep); jerr != nil {
		t.Fatalf("lockstep selftest --json: %v (%v)\nstdout:\n%s\nstderr:\n%s", err, jerr, stdout.String(), stderr.String())
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Logf("selftest in a %s guest:\n%s", rep.Release, table.String())
	if err != nil || rep.Status != StatusHeld {
		t.Errorf("lockstep selftest = %v, status %d; want exit 0, status 0\nstderr:\n%s", err, rep.Status, stderr.String())
	}
	if rep.ABI < 10 || rep.Release != rep.WantRelease || rep.Audit == nil || rep.Audit.BacklogLimit < 8192 {
		t.Errorf("report: release %q (want %q), ABI %d, audit %+v", rep.Release, rep.WantRelease, rep.ABI, rep.Audit)
	}
	if len(rep.Checks) != 4+len(Refusals) {
		t.Errorf("%d checks, want release, lsm, abi, audit and %d refusals", len(rep.Checks), len(Refusals))
	}
	for _, c := range rep.Checks {
		if c.Outcome != Held {
			t.Errorf("%s: %s: %s\nevidence: %q", c.Name, c.Outcome, c.Detail, c.Evidence)
		}
	}
	b, err := os.ReadFile(filepath.Join(results, "selftest.json"))
	if err != nil {
		t.Fatalf("the guest's report: %v", err)
	}
	var guest Report
	if err := json.Unmarshal(b, &guest); err != nil || guest.Status != rep.Status || len(guest.Checks) != len(rep.Checks) {
		t.Errorf("the guest's selftest.json (status %d, %d checks, %v) disagrees with the host's output", guest.Status, len(guest.Checks), err)
	}
}
