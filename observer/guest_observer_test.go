//go:build linux

package observer

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
)

// TestObserveGuestObserverKey observes the observer key on the 7.2.13 pin:
// proc-mounts, whose only refusal beyond what narrowing takes is an
// ungranted read of /proc/mounts, is verified with no mismatch and no
// audit-only record; nofile-hang's joint run waits until the policy's
// 30 s timeout, so it is inconclusive, the trace kept is that of the
// observed re-run, and the verb exits 3 (nothing failed). The console, the
// raw audit lines and the kernel's configuration lie beside run.json.
//
// --tcg-time-factor 1: nofile-hang waits out its timeout by design, twice
// (the joint run and the observed re-run), and under TCG the default
// factor makes each wait ten times the policy's 30 s (the test took 646 s
// and ran past its bound). The factor has its own tests
// (TestTimeFactorHostKernel, verify's TestHereTimeFactor).
func TestObserveGuestObserverKey(t *testing.T) {
	needGuest(t)
	bin := lockstepbin.Build(t)
	ps := copyDir(t, observerPathSet)
	code, out, wall := observeKey(t, bin, "observer", "testdata/exercises", ps, "--tcg-time-factor", "1")
	t.Logf("lockstep observe (%v, exit %d):\n%s", wall, code, out)
	if code != StatusIndeterminate || !strings.Contains(out, "observer_proc-mounts: verified") ||
		!strings.Contains(out, "observer_nofile-hang: INCONCLUSIVE") {
		t.Fatalf("exit %d, want 3 with proc-mounts verified and nofile-hang inconclusive", code)
	}
	k, err := kvmrecord.Read(filepath.Join(ps, "observer_proc-mounts.abi10.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cc := k.CrossCheck; !k.Verified || cc == nil || cc.StraceDenials == 0 || len(cc.Mismatches) != 0 || len(cc.AuditOnly) != 0 {
		t.Errorf("proc-mounts: verified %v, cross_check %+v; want verified, no mismatch, no audit-only", k.Verified, cc)
	}
	if !bytes.Contains(keptTrace(t, ps, "observer_proc-mounts"), []byte(`"/proc/mounts", O_RDONLY) = -1 EACCES`)) {
		t.Error("proc-mounts: the cross-check run was not refused /proc/mounts; the case did not happen")
	}
	h, err := kvmrecord.Read(filepath.Join(ps, "observer_nofile-hang.abi10.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tail, _ := h.Evidence["log_tail"].(string); h.Verified || !strings.HasPrefix(h.Aborted, "inconclusive: the joint run") || !strings.Contains(tail, "could not open file descriptor") {
		t.Errorf("nofile-hang: verified %v, aborted %q, evidence %v", h.Verified, h.Aborted, h.Evidence)
	}
	if !bytes.Contains(keptTrace(t, ps, "observer_nofile-hang"), []byte("could not open file descriptor")) {
		t.Error("nofile-hang: the kept trace does not show where the run stopped")
	}
	run := readRunJSON(t, ps)
	for _, e := range run.Exercises {
		t.Logf("%s: %.1f s, runs %v, trace %+v", e.Exercise, e.Seconds, e.Runs, e.Trace)
		if e.Exercise == "nofile-hang" && (!e.Inconclusive || e.Trace == nil || e.Trace.Run != "observed" || e.Seconds > 600) {
			t.Errorf("nofile-hang in run.json: %+v; want inconclusive within minutes, the observed re-run's trace", e)
		}
	}
	for _, n := range []string{ConsoleFile, AuditRawFile, KernelConfigFile} {
		if fi, err := os.Stat(filepath.Join(ps, n)); err != nil || fi.Size() == 0 || !slices.Contains(run.Artefacts, n) {
			t.Errorf("%s: %v; run.json's artefacts %v", n, err, run.Artefacts)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(ps, AuditRawFile))
	if !bytes.Contains(raw, []byte(`/mounts"`)) {
		t.Errorf("%s holds no record of the refused mount table", AuditRawFile)
	}
}

// keptTrace is the uncompressed .abi10.observed.trace.gz of stem in dir.
func keptTrace(t *testing.T, dir, stem string) []byte {
	t.Helper()
	gz, err := os.ReadFile(filepath.Join(dir, stem+TraceSuffix))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decompress(gz, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
