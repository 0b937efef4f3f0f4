package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// TestImagePinBoots boots Debian 12's kernel through its debian-image pin
// (kernel/debian-images.pins, fetched from this machine's Debian archive and
// unpacked into the cache the first time): boot finds its modules and q35
// with no flags from the user, and selftest reports the Landlock ABI that
// kernel offers (2) and the audit records it cannot write.
func TestImagePinBoots(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	if testing.Short() {
		t.Skip("boots Debian's kernel under TCG (a minute or two)")
	}
	bin := lockstepbin.Build(t)
	pins, err := filepath.Abs("../../kernel/debian-images.pins")
	if err != nil {
		t.Fatal(err)
	}
	const name = "6.1.0-50-amd64"
	// What is under test is the pin's way to a guest, not boot speed (the
	// harness's deadline tests are): Debian's kernel loads 12 modules on q35
	// before its first event, over a minute under TCG beside other guests.
	const bootTimeout = "5m"
	out, err := exec.CommandContext(t.Context(), bin, "boot", "--pins", pins, "--kernel", name, "--accel", "tcg", "--boot-timeout", bootTimeout, "--",
		"/bin/sh", "-c", "uname -r; cat /sys/kernel/security/lsm").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), name+"\n") || !strings.Contains(string(out), "landlock") {
		t.Fatalf("lockstep boot --kernel %s: %v\n%s", name, err, out)
	}
	cmd := exec.CommandContext(t.Context(), bin, "selftest", "--kernel", name, "--accel", "tcg", "--boot-timeout", bootTimeout, "--json")
	cmd.Env = append(cmd.Environ(), "LOCKSTEP_PINS="+pins)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, _ := cmd.Output()
	var rep struct {
		Release string `json:"release"`
		ABI     int    `json:"abi"`
		WantABI int    `json:"want_abi"`
		Checks  []struct{ Name, Outcome, Detail string }
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("selftest --json: %v\n%s\n%s", err, raw, stderr.String())
	}
	if rep.Release != name || rep.ABI != 2 || rep.WantABI != 2 {
		t.Errorf("selftest = release %s, ABI %d (want %d); want %s and ABI 2", rep.Release, rep.ABI, rep.WantABI, name)
	}
	for _, c := range rep.Checks {
		if c.Name == "audit" && (c.Outcome != "failed" || !strings.Contains(c.Detail, "no audit records")) {
			t.Errorf("audit check = %s (%s), want failed: no audit records below ABI 7", c.Outcome, c.Detail)
		}
	}
}
