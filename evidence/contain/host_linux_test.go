package contain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"github.com/lockstep-sandbox/lockstep/record"
)

// hostSetup is the policy of the system's directories with the given
// [limits] lines, and a Setup with the real binary as probe and enforcer,
// for containment checks on this machine (as root: the canaries live in
// /root, the caps are cgroups).
func hostSetup(t *testing.T, limits string) (*policy.Policy, Setup) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the canaries live in /root and the caps are cgroups: needs root")
	}
	featuretest.Require(t, featuretest.Landlock)
	bin := lockstepbin.Build(t)
	p, err := policy.Parse("t.cfg", []byte("[read]\n/usr\n/etc\n[execute]\n/usr/bin\n/usr/lib\n/usr/lib64\n[limits]\n"+limits))
	if err != nil {
		t.Fatal(err)
	}
	return p, Setup{Probe: []string{bin, Verb}, Enforcer: enforcer.Prefix(bin, false), ScratchDir: t.TempDir()}
}

// executeHere runs every containment check on this machine, with the real
// binary as probe and enforcer, for a policy of the system's directories
// and the given [limits] lines; every check that ran must have held.
func executeHere(t *testing.T, limits string) []record.ContainmentCheck {
	t.Helper()
	p, setup := hostSetup(t, limits)
	res, failed, err := Execute(t.Context(), p, setup)
	if err != nil {
		t.Fatalf("Execute with [limits] %q: %v", limits, err)
	}
	if len(failed) != 0 {
		t.Errorf("checks that did not hold: %v", failed)
	}
	return res
}

// TestExecuteSmallMemLimit runs the containment checks for a policy whose
// mem_mb (512, the pruner's floor) is below what the Go probe needs to
// start: before, every check failed "the probe did not start under the
// policy" ("fatal error: failed to reserve page summary memory"); now the
// mem_mb check is unchecked, naming why, and the others run and hold.
func TestExecuteSmallMemLimit(t *testing.T) {
	res := executeHere(t, "mem_mb=512\nnofile=64\n")
	got := map[string]string{}
	for _, r := range res {
		got[r.Name] = r.Unchecked
		if r.Name == "limit nofile" && !r.Refused {
			t.Errorf("limit nofile not refused: %+v", r)
		}
	}
	if u, ok := got["limit mem_mb"]; !ok || !strings.Contains(u, "needs to start") {
		t.Errorf("limit mem_mb = %q (present %v), want unchecked: below what the probe needs to start", u, ok)
	}
	if u, ok := got["limit nofile"]; !ok || u != "" {
		t.Errorf("limit nofile = %q (present %v), want checked", u, ok)
	}
}

// TestExecuteTimeLimits waits out a real timeout and a real CPU limit,
// which Run runs at the same time: each must still end its probe with its
// own status (124; SIGKILL or SIGXCPU at the CPU limit).
func TestExecuteTimeLimits(t *testing.T) {
	start := time.Now()
	res := executeHere(t, "timeout=4\ncpu=2\n")
	held := map[string]bool{}
	for _, r := range res {
		held[r.Name] = r.Refused
	}
	if !held["limit timeout"] || !held["limit cpu"] {
		t.Errorf("limit timeout held %v, limit cpu held %v; want both: %+v", held["limit timeout"], held["limit cpu"], res)
	}
	t.Logf("%d checks in %s (timeout 4 s and cpu 2 s waited out at once)", len(res), time.Since(start).Round(time.Millisecond))
}

// TestProbeEndsAtTimeout: the timeout check's probe ends at the policy's
// timeout, on the enforcer's SIGTERM, not at its SIGKILL 2 s later.
func TestProbeEndsAtTimeout(t *testing.T) {
	featuretest.Require(t, featuretest.Landlock)
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "t.cfg")
	rules := fmt.Sprintf("[read]\n/usr\n/etc\n%[1]s\n[execute]\n/usr\n%[1]s\n[limits]\ntimeout=1\n", bin)
	if err := os.WriteFile(cfg, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, out, err := ExecProbe(t.Context(), []string{bin, "run", "-q", "--config", cfg, "--", bin, Verb, "sleep", "9"}, nil, time.Minute)
	d := time.Since(start)
	if err != nil || st != 124 {
		t.Fatalf("probe under timeout=1 = %d, %v: %s", st, err, out)
	}
	if d > 2500*time.Millisecond {
		t.Errorf("the probe ended %s after its start under timeout=1; want about 1 s (the enforcer's SIGTERM), not the SIGKILL after the 2 s grace", d.Round(time.Millisecond))
	}
}

// TestExecuteOnlyAndSkip: Setup.Only runs the timeout check alone, without
// planting the canaries (their template is where none can be planted);
// Setup.Skip runs every check but it.
func TestExecuteOnlyAndSkip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the canaries live in /root: needs root")
	}
	featuretest.Require(t, featuretest.Landlock)
	bin := lockstepbin.Build(t)
	// A working directory the policy may write into, not there yet: the
	// fsize check would create it, the timeout check alone must not (an
	// exercise run beside it removes and copies it afresh).
	work := filepath.Join(t.TempDir(), "work")
	p, err := policy.Parse("t.cfg", []byte("[read]\n/usr\n/etc\n"+work+"\n[write]\n"+work+"\n[create]\n"+work+
		"\n[execute]\n/usr/bin\n/usr/lib\n/usr/lib64\n[limits]\ntimeout=2\ncpu=1\nfsize_mb=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	setup := Setup{Probe: []string{bin, Verb}, Enforcer: enforcer.Prefix(bin, false), ScratchDir: t.TempDir(), WorkDir: work}
	only := setup
	only.Only = []string{TimeoutCheck}
	only.Canaries = []string{"/proc/lockstep-canary"}
	res, failed, err := Execute(t.Context(), p, only)
	if err != nil || len(failed) != 0 || len(res) != 1 || res[0].Name != TimeoutCheck || !res[0].Refused {
		t.Fatalf("Only timeout = %+v, %v, %v; want the timeout check alone, held", res, failed, err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("the timeout check alone touched the working directory: %v", err)
	}
	skip := setup
	skip.Skip = []string{TimeoutCheck}
	res, failed, err = Execute(t.Context(), p, skip)
	if err != nil || len(failed) != 0 {
		t.Fatalf("Skip timeout: %v, %v", failed, err)
	}
	names := map[string]bool{}
	for _, r := range res {
		names[r.Name] = true
	}
	if names[TimeoutCheck] || !names["limit cpu"] || !names[FsizeCheck] || !names["canary /root/lockstep-prune-canary"] {
		t.Errorf("Skip timeout ran %v; want every check but the timeout's", names)
	}
}

// TestExecuteTwoAtOnce: two containment runs with the default canaries at
// once on one machine both hold every check, each control reading its own
// canary (they shared one fixed path, which the first run to end removed
// under the other; TestPlantTwoRunsAtOnce checks the removal).
func TestExecuteTwoAtOnce(t *testing.T) {
	p, setup := hostSetup(t, "")
	var wg sync.WaitGroup
	var res [2][]record.ContainmentCheck
	var failed [2][]string
	var errs [2]error
	for i := range res {
		wg.Go(func() { res[i], failed[i], errs[i] = Execute(t.Context(), p, setup) })
	}
	wg.Wait()
	for i := range res {
		if errs[i] != nil || len(failed[i]) != 0 {
			t.Errorf("run %d: did not hold %v, %v", i, failed[i], errs[i])
		}
		n := 0
		for _, r := range res[i] {
			if strings.HasPrefix(r.Name, "canary ") && r.Refused && strings.HasPrefix(r.Control, "ok") {
				n++
			}
		}
		if n != len(DefaultCanaries) {
			t.Errorf("run %d: %d canary checks held with their control; want %d: %+v", i, n, len(DefaultCanaries), res[i])
		}
	}
}

// TestFinishStopsWhenCancelled: Finish whose context ends while the early
// timeout check still sleeps (a 60 s timeout) returns at once with the
// context's error and ends the early check, instead of waiting it out.
func TestFinishStopsWhenCancelled(t *testing.T) {
	p, setup := hostSetup(t, "timeout=60\n")
	setup.WorkDir = t.TempDir()
	early := StartEarly(t.Context(), p, setup, TimeoutCheck)
	// Long enough for the other checks to end first on a quiet machine,
	// so that Finish is waiting for the early one when it is cancelled.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := early.Finish(ctx, p, setup)
	// On a quiet machine the error is the deadline; on a slow one the
	// other checks may still have been running, and their error is theirs.
	if took := time.Since(start); err == nil || took > 30*time.Second {
		t.Fatalf("Finish = %v after %v; want an error well before the 60 s timeout check ends", err, took)
	}
	t.Logf("Finish: %v after %v", err, time.Since(start).Round(time.Millisecond))
	select {
	case <-early.done:
	default:
		t.Errorf("the early timeout check still runs after Finish returned")
	}
}

// TestExecuteCancelledIsAnError: checks their caller stopped are an error,
// never an outcome. The cpu check's probe, killed by the cancellation
// (SIGKILL, status 137), looks like one the cpu limit killed, and so
// counted as held.
func TestExecuteCancelledIsAnError(t *testing.T) {
	p, setup := hostSetup(t, "cpu=30\n")
	setup.Only = []string{"limit cpu"}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	res, failed, err := Execute(ctx, p, setup)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Execute stopped after 3 s of a 30 s cpu check = %+v, failed %v, %v; want the deadline as the error", res, failed, err)
	}
}
