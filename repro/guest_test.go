//go:build linux

package repro

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

func needGuest(t *testing.T) {
	t.Helper()
	needHost(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	if _, err := guesttest.PinnedKernel(); err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
}

// reproCLI runs `lockstep repro --json …` and returns its status and
// result.
func reproCLI(t *testing.T, args ...string) (int, *Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lockstepBinary(t), append([]string{"repro", "--json"}, args...)...)
	cmd.Dir = "testdata"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lockstep repro: %v\n%s", err, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("lockstep repro (exit %d) printed no result: %v\n%s\n%s", code, err, out.String(), errb.String())
	}
	return code, &res
}

// TestReproHostAgainstPinUDP is the acceptance case: on the host's ABI-7
// kernel the UDP bind is allowed, on the 7.2.13 pin (ABI 10) it is refused
// with a net.bind_udp record: exactly one difference, exit 1. With the
// UDP row added, the host cannot enforce it: one difference of its own kind
// naming the rule and ABI 10, not a refusal of the bind.
func TestReproHostAgainstPinUDP(t *testing.T) {
	needGuest(t)
	code, res := reproCLI(t, "--kernel", "host", "--kernel", kernel.DefaultPin, "--config", "udp.cfg", "--", "/usr/bin/python3", "-c", pyUDP)
	if code != 1 || res.Status != StatusDiffer || len(res.Differences) != 1 {
		t.Fatalf("repro = exit %d (%s), differences %+v; want exactly one, exit 1", code, res.Reason, res.Differences)
	}
	d := res.Differences[0]
	if d.Kind != KindRefusedOnOne || d.A != nil || d.B == nil || d.B.Call != "bind" || strings.Join(d.B.Rights, ",") != "net.bind_udp" ||
		len(d.B.Audit) != 1 || !strings.Contains(d.B.Audit[0], "blockers=net.bind_udp") || strings.Join(d.B.Grant, ",") != "[bind] allow 5000 udp" {
		t.Errorf("difference = %+v (B %+v), want the bind refused on %s only, with its record and row", d, d.B, kernel.DefaultPin)
	}
	if g := res.Kernels[1].Guest; g == nil || g.BzImageSHA256 == "" || res.Kernels[1].ABI != 10 {
		t.Errorf("guest side = %+v, want ABI 10 with provenance", res.Kernels[1])
	}

	code, res = reproCLI(t, "--kernel", "host", "--kernel", kernel.DefaultPin, "--config", "udp.cfg", "--config", "udp-allow.cfg",
		"--", "/usr/bin/python3", "-c", pyUDP)
	if code != 1 || len(res.Differences) != 1 {
		t.Fatalf("with the UDP row: exit %d (%s), differences %+v; want one, exit 1", code, res.Reason, res.Differences)
	}
	d = res.Differences[0]
	if d.Kind != KindUnenforceable || d.Side != 0 || len(d.Rules) != 1 || d.Rules[0].Rule != "[bind] allow 5000 udp" || d.Rules[0].NeedABI != 10 {
		t.Errorf("difference = %+v, want the host unable to enforce [bind] allow 5000 udp (ABI 10)", d)
	}
	if o := res.Kernels[1]; o.Status != 0 || len(o.Refusals) != 0 {
		t.Errorf("7.2.13 with the row: status %d, refusals %+v; want the bind allowed", o.Status, o.Refusals)
	}
}
