//go:build linux

package observer

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"

	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/record"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// lockstepBinary builds cmd/lockstep once per test binary: the runs
// re-execute it (`run`, the proof's refusal child, the probes).
func lockstepBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "observer-test-bin.")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "lockstep")
		binErr = lockstepbin.BuildTo(binPath)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func needRootAudit(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the observer registers as the audit daemon and needs root")
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 7 {
		t.Fatalf("Landlock ABI = %d, %v; this machine promises at least 7 (audit logging)", abi, err)
	}
}

// hostVerification sets up one exercise's verification on this machine's
// kernel, with a collector of its own.
// openProgram opens bin as the observer's program (observer.program),
// closed when t ends.
func openProgram(t *testing.T, bin string) *os.File {
	t.Helper()
	f, err := refns.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func hostVerification(t *testing.T, backlog uint32, raw io.Writer) (*verification, *policy.Policy) {
	t.Helper()
	needRootAudit(t)
	bin := lockstepBinary(t)
	// A lowered backlog is for provoking loss: drop at once rather than
	// make the refusing task wait for room.
	col, err := audit.Start(audit.Options{BacklogLimit: backlog, DropWhenFull: backlog != 0 && backlog < audit.DefaultBacklogLimit, Raw: raw})
	if err != nil {
		t.Fatalf("audit.Start: %v", err)
	}
	t.Cleanup(func() { col.Close() })
	found, err := exercise.ForKey("../testdata/exercises", "fixture")
	if err != nil || len(found) != 1 {
		t.Fatalf("ForKey(fixture) = %v, %v", found, err)
	}
	ex, err := exercise.Read(found[0])
	if err != nil {
		t.Fatal(err)
	}
	o := &observer{opts: GuestOptions{Key: "fixture", ReferenceRuns: 1, JointRuns: 1, Rounds: 3}, exe: bin,
		work: exercise.DefaultWorkDir, scratch: t.TempDir(), wait: engine.DefaultWait, col: col, abi: 10, log: slog.New(slog.DiscardHandler),
		steps: &schedule.Log{}}
	o.program = openProgram(t, bin)
	o.runExe = refns.Path(o.program)
	o.opts.Progress = testWriter{t}
	es := &ExerciseSummary{Runs: map[string]int{}}
	v := &verification{o: o, k: &kvmrecord.Record{}, es: es, ex: ex}
	p, err := policy.ParseFile(filepath.Join(fixtureDir, "fixture_udp-fixture.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	return v, p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestCrossCheckHostKernel runs the fixture's cross-check on this machine's
// kernel (Landlock ABI 7 logs filesystem denials too): strace's refusals and
// the audit records must agree one for one.
func TestCrossCheckHostKernel(t *testing.T) {
	var raw lockedBuffer
	v, p := hostVerification(t, 0, &raw)
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v", err)
	}
	reason, err := v.crossCheck(t.Context(), p)
	if err != nil {
		t.Fatalf("crossCheck: %v", err)
	}
	cc := v.k.CrossCheck
	t.Logf("cross-check: %+v", cc)
	if reason != "" {
		t.Errorf("reason = %q", reason)
	}
	if cc.StraceDenials == 0 || cc.AuditRecords == 0 || len(cc.Mismatches) != 0 {
		t.Errorf("cross_check = %+v, want refusals and records that agree", cc)
	}
	if v.trace == nil || v.es.Trace == nil || v.es.Trace.SHA256 != record.SHA256Hex(v.trace) {
		t.Errorf("trace info %+v does not describe the kept trace", v.es.Trace)
	}
	// The run stopped at TracedCalls only: the exercise's reads, stats and
	// closes (most of its calls) are not in the trace.
	for _, c := range []string{"read", "newfstatat", "close", "lseek"} {
		if bytes.Contains(v.trace, []byte(" "+c+"(")) {
			t.Errorf("the kept trace holds %s calls: the run was not traced with TracedCalls", c)
		}
	}
	// LOCKSTEP_OBSERVER_CAPTURE=dir keeps the run's trace and records as
	// test data (engine/testdata/crosscheck-host).
	if dir := os.Getenv("LOCKSTEP_OBSERVER_CAPTURE"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "trace.txt"), v.trace, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "netlink.txt"), raw.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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

func (w *lockedBuffer) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.b.Bytes()...)
}

// TestRunBelowABI10: on a kernel below Landlock ABI 10 (this machine's) the
// observer's proof does not hold, so the run is indeterminate (3), never 0,
// and nothing at all is written.
func TestRunBelowABI10(t *testing.T) {
	needRootAudit(t)
	featuretest.RequireWithout(t, featuretest.LandlockUDP)
	out := t.TempDir()
	sum, err := Guest(t.Context(), GuestOptions{Key: "fixture", Exercises: "../testdata/exercises", PathSets: fixtureDir,
		Out: out, Exe: lockstepBinary(t), WantABI: 10, Scratch: t.TempDir()})
	if err != nil {
		t.Fatalf("Guest() = %v", err)
	}
	if sum.Status != StatusIndeterminate || sum.Proof == nil || sum.Proof.Status != StatusIndeterminate {
		t.Errorf("status %d (%s), want 3 from the proof", sum.Status, sum.Reason)
	}
	if !strings.Contains(sum.Reason, "proof") {
		t.Errorf("reason %q does not name the proof", sum.Reason)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("wrote %d file(s), want none: %v", len(ents), ents)
	}
}

// TestAuditLossHostKernel: with the kernel's backlog limit at 1 the
// cross-check's burst of refusals loses records; such a run is never
// compared, and the exercise fails with "records were lost".
func TestAuditLossHostKernel(t *testing.T) {
	v, p := hostVerification(t, 1, nil)
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v", err)
	}
	// Whether a burst overflows a queue of one depends on how fast the
	// collector drains it; three tries make the loss all but certain.
	for try := 1; try <= 3; try++ {
		st0, err := v.o.col.Status()
		if err != nil {
			t.Fatal(err)
		}
		v.k.CrossCheck = nil
		reason, err := v.crossCheck(t.Context(), p)
		st1, _ := v.o.col.Status()
		t.Logf("try %d: lost %d -> %d, backlog limit %d; reason %q, err %v", try, st0.Lost, st1.Lost, st1.BacklogLimit, reason, err)
		if st1.Lost == st0.Lost {
			if err != nil {
				t.Fatalf("no loss, yet %v", err)
			}
			continue
		}
		var ae *engine.AbortError
		if !errors.As(err, &ae) || !strings.Contains(ae.Reason, "records were lost") {
			t.Fatalf("crossCheck with lost records = %q, %v; want an abort naming lost records", reason, err)
		}
		if v.k.CrossCheck != nil {
			t.Errorf("a run with lost records was compared: %+v", v.k.CrossCheck)
		}
		return
	}
	t.Fatal("the kernel lost nothing in three bursts with backlog limit 1; the case did not happen")
}

// TestABI10AndContainmentHostKernel runs the ABI-10 phase and the
// containment checks of the fixture on this machine's kernel. Below ABI 10
// UDP binds are not handled, so the joint runs agree with the reference at
// once and no row is found; every containment probe must hold (the timeout
// of 600 s is too long to wait out and is skipped, said so).
func TestABI10AndContainmentHostKernel(t *testing.T) {
	v, p := hostVerification(t, 0, nil)
	// On ABI 10 the fixture's UDP bind is refused: the guest test covers it.
	abi := featuretest.RequireWithout(t, featuretest.LandlockUDP)
	early := v.startTimeoutCheck(t.Context(), p)
	defer early.Stop()
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v", err)
	}
	final, contained, err := v.abi10(t.Context(), p, early)
	if err != nil || contained != nil {
		t.Fatalf("abi10: %v, containment beside it %v (no lanes: want none)", err, contained)
	}
	if len(v.k.Rows) != 0 || final != p {
		t.Errorf("rows %v on ABI %d, want none and the policy unchanged", v.k.Rows, abi)
	}
	checks, failed, err := v.contain(t.Context(), final, p, early)
	if err != nil {
		t.Fatalf("contain: %v", err)
	}
	if len(failed) > 0 {
		t.Errorf("containment checks did not hold: %v", failed)
	}
	ran := 0
	for _, c := range containmentChecks(checks) {
		t.Logf("%+v", c)
		if c.Name == "limit timeout" || strings.Contains(c.Name, "timeout") {
			if !c.Skipped {
				t.Errorf("timeout=600 probed: %+v", c)
			}
			continue
		}
		if c.Held {
			ran++
		} else if !c.Skipped {
			t.Errorf("containment %s did not hold: %s", c.Name, c.Detail)
		}
	}
	if ran < 5 {
		t.Errorf("%d checks held, want the canaries, read-only write, connect, bind and the nofile and fsize limits", ran)
	}
}

// TestABI10AbortHostKernel: a joint difference that is not a UDP bind (here
// the fixture's data directory is missing from the policy, so a test fails)
// yields no row after the diagnosis run and aborts the exercise.
func TestABI10AbortHostKernel(t *testing.T) {
	v, p := hostVerification(t, 0, nil)
	if err := v.reference(t.Context()); err != nil {
		t.Fatalf("reference: %v", err)
	}
	delete(p.FS, "/var/tmp/testing-dir/data")
	_, _, err := v.abi10(t.Context(), p, nil)
	var ae *engine.AbortError
	if !errors.As(err, &ae) || ae.Reason != "the guest kernel differs from the default prune's in more than a UDP bind port" {
		t.Fatalf("abi10 = %v, want the more-than-a-UDP-bind abort", err)
	}
	if v.es.Runs["diagnosis"] != 1 || len(v.k.Rows) != 0 {
		t.Errorf("runs %v, rows %v; want one diagnosis run and no row", v.es.Runs, v.k.Rows)
	}
	if o, _ := ae.Evidence["other_refusals"].([]string); !slices.ContainsFunc(o, func(s string) bool { return strings.Contains(s, "/var/tmp/testing-dir/data") }) {
		t.Errorf("evidence %v does not name the refused data directory", ae.Evidence)
	}
}
