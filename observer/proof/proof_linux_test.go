//go:build linux

package proof

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

func TestMain(m *testing.M) {
	if os.Getenv("LOCKSTEP_ROLE") == Role {
		os.Exit(RefusalMain())
	}
	os.Exit(m.Run())
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestRunHostKernel runs the whole proof on this machine's kernel with the
// 7.2.13 pin's ABI (10): every right class the kernel offers must hold, the
// classes above its ABI are "not offered", and a kernel below the pin's ABI
// is status 3, never 0.
func TestRunHostKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the proof registers as the audit daemon and needs root")
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 7 {
		t.Fatalf("Landlock ABI = %d, %v; this machine promises at least 7", abi, err)
	}
	var raw lockedBuffer
	rep, err := Run(t.Context(), Options{WantABI: 10, Exe: os.Args[0], Dir: t.TempDir(), Raw: &raw})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Logf("proof on %s:\n%s", rep.Release, table.String())
	for _, c := range rep.Checks {
		rf, isRefusal := LookupRefusal(c.Name)
		switch {
		case c.Name == "abi":
			if want := map[bool]Outcome{true: Held, false: Failed}[abi >= 10]; c.Outcome != want {
				t.Errorf("abi check = %s (%s), want %s", c.Outcome, c.Detail, want)
			}
		case !isRefusal:
			if c.Outcome != Held {
				t.Errorf("%s check = %s (%s), want held", c.Name, c.Outcome, c.Detail)
			}
		case rf.ABI() > abi:
			if c.Outcome != NotOffered {
				t.Errorf("%s = %s, want not offered on ABI %d", c.Name, c.Outcome, abi)
			}
		default:
			if c.Outcome != Held {
				t.Errorf("%s = %s: %s\nevidence: %q", c.Name, c.Outcome, c.Detail, c.Evidence)
			}
		}
	}
	wantStatus := StatusHeld
	if abi < 10 {
		wantStatus = StatusIndeterminate
	}
	if rep.Status != wantStatus {
		t.Errorf("status = %d (%s), want %d", rep.Status, rep.Summary(), wantStatus)
	}
	if os.Getenv("LOCKSTEP_PROOF_DUMP") != "" {
		os.WriteFile(os.Getenv("LOCKSTEP_PROOF_DUMP"), raw.b.Bytes(), 0o644)
	}
}

// TestSpecsCoverRefusals: every refusal has a way to be made and an object
// expectation (expectObject panics on a missing one).
func TestSpecsCoverRefusals(t *testing.T) {
	for _, r := range Refusals {
		if sp, ok := specs[r.Name]; !ok || sp.act == nil || sp.attr != attrOf(r.Right) {
			t.Errorf("refusal %s has no spec, or one that does not handle %s alone", r.Name, r.Right)
		}
		expectObject(r, newFixture(t.TempDir(), "", 0), &audit.Access{})
	}
	for name := range captureABI {
		if _, ok := specs[name]; !ok {
			t.Errorf("capture scenario %s has no spec", name)
		}
	}
}
