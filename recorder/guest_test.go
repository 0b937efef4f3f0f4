//go:build linux

package recorder

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// recordStep runs one `lockstep record` step and returns its status and
// output; each step's wall time is logged (the TCG timings of the note).
func recordStep(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	t0 := time.Now()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"record"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lockstep record %s: %v", args[0], err)
	}
	t.Logf("lockstep record %s: status %d in %.1f s", args[0], code, time.Since(t0).Seconds())
	return code, out.String()
}

// needGuest skips without QEMU or root and returns the pinned kernel and
// the lockstep binary.
func needGuest(t *testing.T) (bz, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the audit observer of record check needs root")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	bz, err := guesttest.PinnedKernel()
	if err != nil {
		t.Fatal(err)
	}
	return bz, lockstepbin.Build(t)
}

// The reference sessions, recorded, generated and checked in guests on
// the pinned kernel: each step passes.
func TestRecordReferenceGuest(t *testing.T) {
	bz, bin := needGuest(t)
	for _, ref := range []struct {
		name, dir string
		cmd       []string
	}{
		{"repl", "testdata/repl", []string{"python3", "-q"}},
		{"tool", "testdata/tool", []string{"python3", "greet.py"}},
	} {
		t.Run(ref.name, func(t *testing.T) {
			d := t.TempDir()
			common := []string{"--name", ref.name, "--dir", d, "--kernel", bz, "--exercise", filepath.Join(ref.dir, "exercise"),
				"--script", filepath.Join(ref.dir, "session.script")}
			if code, out := recordStep(t, bin, append(append([]string{"run"}, common...), append([]string{"--"}, ref.cmd...)...)...); code != 0 {
				t.Fatalf("record run = %d:\n%s", code, out)
			}
			if code, out := recordStep(t, bin, "generate", "--name", ref.name, "--dir", d); code != 0 {
				t.Fatalf("record generate = %d:\n%s", code, out)
			}
			if code, out := recordStep(t, bin, append(append([]string{"check"}, common...), append([]string{"--"}, ref.cmd...)...)...); code != 0 {
				t.Fatalf("record check = %d:\n%s", code, out)
			}
		})
	}
}

// The REPL's policy without its UDP bind row: check fails, naming the
// refused bind, its object, its right and the kernel's audit record.
func TestRecordCheckNamesRefusalGuest(t *testing.T) {
	bz, bin := needGuest(t)
	d := t.TempDir()
	common := []string{"--name", "repl", "--dir", d, "--kernel", bz, "--exercise", "testdata/repl/exercise", "--script", "testdata/repl/session.script"}
	if code, out := recordStep(t, bin, append(append([]string{"run"}, common...), "--", "python3", "-q")...); code != 0 {
		t.Fatalf("record run = %d:\n%s", code, out)
	}
	if code, out := recordStep(t, bin, "generate", "--name", "repl", "--dir", d); code != 0 {
		t.Fatalf("record generate = %d:\n%s", code, out)
	}
	cfg, err := os.ReadFile(filepath.Join(d, "repl", PolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Replace(string(cfg), "allow 40123 udp\n", "", 1)
	if cut == string(cfg) {
		t.Fatalf("the generated policy has no UDP bind row:\n%s", cfg)
	}
	pol := filepath.Join(t.TempDir(), "cut.cfg")
	if err := os.WriteFile(pol, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := recordStep(t, bin, append(append([]string{"check", "--policy", pol}, common...), "--", "python3", "-q")...)
	if code != StatusFail {
		t.Fatalf("record check without the bind row = %d, want %d:\n%s", code, StatusFail, out)
	}
	for _, want := range []string{"refused bind 40123/udp (net.bind_udp)", "kernel record: audit: type=1423", "blockers=net.bind_udp"} {
		if !strings.Contains(out, want) {
			t.Errorf("record check's output lacks %q:\n%s", want, out)
		}
	}
}

// run --sample measures the session's process tree in the guest (the
// samples land in session.json), and generate --limits turns them into
// [limits]; mem_mb only with --memory-pinned.
func TestRecordSampleGuest(t *testing.T) {
	bz, bin := needGuest(t)
	d := t.TempDir()
	if code, out := recordStep(t, bin, "run", "--sample", "--name", "tool", "--dir", d, "--kernel", bz, "--exercise", "testdata/tool/exercise",
		"--script", "testdata/tool/session.script", "--", "python3", "greet.py"); code != 0 {
		t.Fatalf("record run --sample = %d:\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(d, "tool", SessionsDir, "001", SessionFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec SessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if m := rec.Limits; m == nil || m.Samples == 0 || m.Tasks < 1 || m.VMPeakMB <= 0 || m.HighestFD < 2 || m.WallSeconds <= 0 {
		t.Fatalf("the session's samples %+v: want the python process measured", rec.Limits)
	}
	t.Logf("samples: %+v", *rec.Limits)
	for _, pinned := range []bool{false, true} {
		args := []string{"generate", "--limits", "--name", "tool", "--dir", d}
		if pinned {
			args = append(args, "--memory-pinned")
		}
		if code, out := recordStep(t, bin, args...); code != 0 {
			t.Fatalf("record %v = %d:\n%s", args, code, out)
		}
		cfg, err := os.ReadFile(filepath.Join(d, "tool", PolicyFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), "[limits]\ntimeout=") || strings.Contains(string(cfg), "mem_mb=") != pinned {
			t.Errorf("--memory-pinned %v: the policy's limits:\n%s", pinned, cfg)
		}
	}
}

// A real TLS client recorded in a guest (testdata/tls/guest: Python's ssl
// module sends its ClientHello for Api.Example.TEST to 192.0.2.2:4433, an
// address run.sh puts on the guest's loopback device): generate grants the
// connect by the server name, with the resolver line. (The session is
// INCOMPLETE, status 6, for ip's netlink calls and the listener's bind
// to an address outside loopback: the scaffolding, not the client.)
func TestRecordTLSGuest(t *testing.T) {
	bz, bin := needGuest(t)
	d := t.TempDir()
	if code, out := recordStep(t, bin, "run", "--name", "tls", "--dir", d, "--kernel", bz, "--exercise", "testdata/tls/guest",
		"--script", "testdata/tls/guest.script", "--", "sh", "run.sh"); code != 0 {
		t.Fatalf("record run = %d:\n%s", code, out)
	}
	code, out := recordStep(t, bin, "generate", "--name", "tls", "--dir", d)
	cfg, err := os.ReadFile(filepath.Join(d, "tls", PolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the server name of the TLS ClientHello a session sent to 192.0.2.2\nallow api.example.test:4433\n", "needs a resolver"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("record generate = %d; the policy lacks %q:\n%s\n%s", code, want, cfg, out)
		}
	}
	if strings.Contains(string(cfg), "allow 192.0.2.2") {
		t.Errorf("the connect is held by address too:\n%s", cfg)
	}
}
