//go:build linux

package observer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/guesttest"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
	"github.com/lockstep-sandbox/lockstep/record"
)

func needGuest(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64 on PATH: guest tests need QEMU")
	}
	if _, err := guesttest.PinnedKernel(); err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
}

// copyPathSet copies testdata/path_sets/fixture into a fresh directory.
func copyPathSet(t testing.TB) string {
	t.Helper()
	return copyDir(t, fixtureDir)
}

// copyDir copies the files of src into a fresh directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// observeGuest runs `lockstep observe --key fixture` on the 7.2.13 pin and
// returns its exit status, output and wall time.
func observeGuest(t testing.TB, bin, exercises, pathSets string) (int, string, time.Duration) {
	t.Helper()
	return observeKey(t, bin, "fixture", exercises, pathSets)
}

// observeKey runs `lockstep observe --key key` on the 7.2.13 pin.
func observeKey(t testing.TB, bin, key, exercises, pathSets string, flags ...string) (int, string, time.Duration) {
	t.Helper()
	var out bytes.Buffer
	code, wall := observeKeyTo(t, bin, key, exercises, pathSets, &out, flags...)
	return code, out.String(), wall
}

// observeKeyTo runs `lockstep observe --key key` (and flags) on the 7.2.13
// pin with its output going to out, and returns its exit status and wall
// time.
func observeKeyTo(t testing.TB, bin, key, exercises, pathSets string, out io.Writer, flags ...string) (int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	// The HTML report goes beside the path set (outside it: the orchestrator
	// reads every file there); checkObserveGuest checks it.
	args := append([]string{"observe", "--key", key, "--exercises", exercises, "--path-sets", pathSets,
		"--html", filepath.Join(filepath.Dir(pathSets), "observe.html")}, flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("lockstep observe: %v\n%s", err, out)
		}
		code = ee.ExitCode()
	}
	return code, wall
}

// stampedLines keeps what a command writes and when, on this host's clock,
// each line arrived: the guest's progress lines stream out as they are
// written, and the guest's own clock (jiffies under TCG) loses time when
// the host is loaded.
type stampedLines struct {
	mu    sync.Mutex
	all   bytes.Buffer
	part  []byte
	lines []string
	at    []time.Time
}

func (s *stampedLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.all.Write(p)
	s.part = append(s.part, p...)
	for {
		i := bytes.IndexByte(s.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		s.lines, s.at = append(s.lines, string(s.part[:i])), append(s.at, now)
		s.part = s.part[i+1:]
	}
}

func (s *stampedLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all.String()
}

// between is the time from the first line containing from to the first
// line after it containing to.
func (s *stampedLines) between(from, to string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range s.lines {
		if !strings.Contains(l, from) {
			continue
		}
		for j := i + 1; j < len(s.lines); j++ {
			if strings.Contains(s.lines[j], to) {
				return s.at[j].Sub(s.at[i]), true
			}
		}
		break
	}
	return 0, false
}

func readRunJSON(t testing.TB, dir string) RunJSON {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r RunJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestObserveGuest is the acceptance run: `lockstep observe --key fixture
// --exercises testdata/exercises` in a guest on the 7.2.13 pin verifies the
// fixture, finds exactly the UDP row the default prune's policy lacks, and
// writes the sidecar, the record and the trace, all consistent with each
// other and with run.json.
//
// Its sidecar and verdicts are also those the observer gave before its
// speed-up (the same verdicts and sidecars byte for byte),
// captured in testdata/observe-fixture-reference.
func TestObserveGuest(t *testing.T) {
	needGuest(t)
	ps := checkObserveGuest(t, "../testdata/exercises")
	want, wantSidecar := readFixtureVerdicts(t, fixtureReference)
	got, gotSidecar := readFixtureVerdicts(t, ps)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("verdicts differ from the reference's:\n got %+v\nwant %+v", got, want)
	}
	if !bytes.Equal(gotSidecar, wantSidecar) {
		t.Errorf("the sidecar differs from the reference's (dates aside):\n%s\nwant:\n%s", gotSidecar, wantSidecar)
	}
}

// fixtureReference holds the fixture's observation by the code before the
// observer's speed-up; its README says how it was made.
const fixtureReference = "testdata/observe-fixture-reference"

// fixtureVerdicts is everything an observation of the fixture concluded,
// without what differs from run to run (times, pids, ports, the date).
type fixtureVerdicts struct {
	Status                      int
	Verified, Inconclusive      bool
	Aborted, Reason             string
	Rows                        []string
	RowRecords                  []int
	StraceDenials, AuditRecords int
	Mismatches, AuditOnly       int
	Matched                     int
	Containment                 []string
	Runs                        map[string]int
}

var runDate = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z`)

// readFixtureVerdicts reads the verdicts of the fixture's observation in dir
// (its .abi10.json and run.json) and its sidecar with the date of the run
// blanked.
func readFixtureVerdicts(t *testing.T, dir string) (fixtureVerdicts, []byte) {
	t.Helper()
	stem := filepath.Join(dir, "fixture_udp-fixture")
	k, err := kvmrecord.Read(stem + ".abi10.json")
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := os.ReadFile(stem + ".abi10.cfg")
	if err != nil {
		t.Fatal(err)
	}
	run := readRunJSON(t, dir)
	if len(run.Exercises) != 1 || k.CrossCheck == nil {
		t.Fatalf("%s: %d exercises in run.json, cross_check %v", dir, len(run.Exercises), k.CrossCheck)
	}
	e := run.Exercises[0]
	v := fixtureVerdicts{Status: run.Status, Verified: k.Verified, Inconclusive: e.Inconclusive, Aborted: k.Aborted, Reason: e.Reason,
		Rows: rowRules(k.Rows), StraceDenials: k.CrossCheck.StraceDenials, AuditRecords: k.CrossCheck.AuditRecords,
		Mismatches: len(k.Mismatches), AuditOnly: len(k.AuditOnly), Matched: len(e.Matched), Runs: e.Runs}
	for _, r := range k.Rows {
		v.RowRecords = append(v.RowRecords, len(r.Audit))
	}
	for _, c := range e.Containment {
		v.Containment = append(v.Containment, fmt.Sprintf("%s held=%v skipped=%v", c.Name, c.Held, c.Skipped))
	}
	return v, runDate.ReplaceAll(sidecar, []byte("DATE"))
}

// checkSchedule checks the observation's event log (run.json's schedule)
// for the runs made side by side. A warm-up run goes beside the kernel
// proof, before any other. observe's default two vCPUs are two lanes: the
// last two reference runs run in the one lane the cross-check leaves,
// beside it, and round 2's last two joint runs side by side. The
// cross-check foretells round 1's difference, so the diagnosis runs beside
// round 1's first joint run (in a lane) and is kept, and round 2's
// settling, so round 2's first joint run is made beside the diagnosis,
// under the rows foretold, and kept, and the containment checks run beside
// round 2's other runs.
func checkSchedule(t *testing.T, events []schedule.Event) {
	t.Helper()
	at := func(step string, kind schedule.Kind) int {
		return slices.Index(events, schedule.Event{Step: step, Kind: kind})
	}
	besideCross := "reference runs beside the cross-check"
	// In the order each causes the next (a step's start, its lane's runs,
	// the decision to keep it), whatever the timing of the runs.
	want := []schedule.Event{{Step: WarmUpStep, Kind: schedule.Started}, {Step: WarmUpStep, Kind: schedule.Discarded},
		{Step: besideCross, Kind: schedule.Started}, {Step: LaneStep("reference run 2/3", 1, 1), Kind: schedule.Started},
		{Step: LaneStep("reference run 3/3", 1, 1), Kind: schedule.Started}, {Step: besideCross, Kind: schedule.Kept},
		{Step: "diagnosis (round 1)", Kind: schedule.Started}, {Step: LaneStep("joint run 1/3 (round 1)", 1, 1), Kind: schedule.Started},
		{Step: nextStep(2), Kind: schedule.Started}, {Step: "diagnosis (round 1)", Kind: schedule.Kept}, {Step: nextStep(2), Kind: schedule.Kept},
		{Step: "containment checks (round 2)", Kind: schedule.Started}, {Step: LaneStep("joint run 3/3 (round 2)", 2, 2), Kind: schedule.Started},
		{Step: "containment checks (round 2)", Kind: schedule.Kept}}
	last := -1
	for _, e := range want {
		i := at(e.Step, e.Kind)
		switch {
		case i < 0:
			t.Errorf("the schedule has no %q %s: the runs did not run side by side as planned; it has %+v", e.Step, e.Kind, events)
		case i < last:
			t.Errorf("the schedule has %q %s before the event the plan puts before it: %+v", e.Step, e.Kind, events)
		default:
			last = i
		}
	}
	if at("cross-check run", schedule.Cancelled) >= 0 {
		t.Errorf("the cross-check was cancelled, its reference runs having failed: %+v", events)
	}
}

// checkObserveGuest observes the fixture of the exercise tree, checks
// every acceptance property of the results and returns the path set.
func checkObserveGuest(t *testing.T, exercises string) string {
	bin := lockstepbin.Build(t)
	ps := copyPathSet(t)
	code, out, wall := observeGuest(t, bin, exercises, ps)
	t.Logf("lockstep observe (%v, exit %d):\n%s", wall, code, out)
	checkSchedule(t, readRunJSON(t, ps).Schedule)
	stem := filepath.Join(ps, "fixture_udp-fixture")
	if page, err := os.ReadFile(filepath.Join(filepath.Dir(ps), "observe.html")); err != nil {
		t.Errorf("observe --html wrote no report: %v", err)
	} else if !bytes.Contains(page, []byte("<html")) || !bytes.Contains(page, []byte("udp-fixture")) {
		t.Errorf("observe --html: the report does not name the exercise (%d bytes)", len(page))
	}
	if code != 0 {
		// The fixture only binds its UDP port: a datagram sent to it would
		// also need net.connect_send_udp, which no policy can hold below
		// ABI 10, and the observer would rightly find more than a bind row.
		if k, err := kvmrecord.Read(stem + ".abi10.json"); err == nil {
			ev, _ := json.Marshal(k.Evidence)
			t.Fatalf("exit %d, want 0: aborted %q, rows %q, evidence %s", code, k.Aborted, rowRules(k.Rows), ev)
		}
		t.Fatalf("exit %d, want 0", code)
	}
	k, err := kvmrecord.Read(stem + ".abi10.json")
	if err != nil {
		t.Fatal(err)
	}
	if !k.Verified || k.Aborted != "" {
		t.Errorf("verified %v, aborted %q", k.Verified, k.Aborted)
	}
	if got := rowRules(k.Rows); !slices.Equal(got, []string{"allow 5000 udp"}) {
		t.Errorf("rows = %q, want [allow 5000 udp]", got)
	}
	cc := k.CrossCheck
	if cc == nil || cc.StraceDenials == 0 || cc.AuditRecords == 0 || len(cc.Mismatches) != 0 || len(k.Mismatches) != 0 {
		t.Errorf("cross_check = %+v, want strace denials and records, no mismatches", cc)
	}
	cfg, err := os.ReadFile(stem + ".cfg")
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := os.ReadFile(stem + ".abi10.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if k.ABI10CfgSHA256 == nil || *k.ABI10CfgSHA256 != record.SHA256Hex(sidecar) {
		t.Errorf("abi10_cfg_sha256 %v, sidecar hashes to %s", k.ABI10CfgSHA256, record.SHA256Hex(sidecar))
	}
	if err := k.Vouches(cfg, sidecar); err != nil {
		t.Error(err)
	}
	if want := kvmrecord.Sidecar(k.Key, k.Exercise, k.Provenance, k.Rows); !bytes.Equal(sidecar, want) {
		t.Errorf("sidecar:\n%s\nwant (Phobos's sidecar shape):\n%s", sidecar, want)
	}
	run := readRunJSON(t, ps)
	if !strings.HasPrefix(run.KernelRelease, "7.2.13") || run.BzImageSHA256 == "" || run.Audit == nil || run.Audit.Received == 0 || run.Audit.Lost != run.Audit.LostBefore {
		t.Errorf("run.json: release %q, bzImage %q, audit %+v", run.KernelRelease, run.BzImageSHA256, run.Audit)
	}
	if len(run.Exercises) != 1 || run.Exercises[0].Trace == nil {
		t.Fatalf("run.json exercises = %+v", run.Exercises)
	}
	gz, err := os.ReadFile(stem + TraceSuffix)
	if err != nil {
		t.Fatal(err)
	}
	trace, err := Decompress(gz, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if ti := run.Exercises[0].Trace; record.SHA256Hex(trace) != ti.SHA256 || len(trace) != ti.Bytes || ti.Run != "cross-check" {
		t.Errorf("the trace decompresses to %d bytes (%s), run.json names %+v", len(trace), record.SHA256Hex(trace), ti)
	}
	calls := 0
	refusedBind := false
	if _, err := strace.Parse(bytes.NewReader(trace), func(c *strace.Call) error {
		calls++
		if c.Name == "bind" && c.Errno == "EACCES" {
			refusedBind = true
		}
		return nil
	}); err != nil {
		t.Errorf("the trace does not parse as strace output: %v", err)
	}
	if calls == 0 || !refusedBind {
		t.Errorf("the trace has %d calls, refused bind %v; want the cross-check run's, with the refused UDP bind", calls, refusedBind)
	}
	for _, c := range run.Exercises[0].Containment {
		if !c.Held && !c.Skipped {
			t.Errorf("containment %s: %s", c.Name, c.Detail)
		}
	}
	if e := run.Exercises[0]; len(e.Reference) > 0 {
		var ref float64
		for _, s := range e.Reference {
			ref += s
		}
		ref /= float64(len(e.Reference))
		t.Logf("observer overhead: exercise %.1f s in the guest vs bare reference %.2f s (ratio %.0fx); host wall %.1f s (ratio %.0fx); runs %v",
			e.Seconds, ref, e.Seconds/ref, wall.Seconds(), wall.Seconds()/ref, e.Runs)
	}
	return ps
}

// TestObserveGuestHashMismatch: a .cfg that is not the file its record
// describes fails its exercise with the reason, and the run exits 1.
func TestObserveGuestHashMismatch(t *testing.T) {
	needGuest(t)
	bin := lockstepbin.Build(t)
	ps := copyPathSet(t)
	cfgPath := filepath.Join(ps, "fixture_udp-fixture.cfg")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(cfg, []byte("# edited after the prune\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := observeGuest(t, bin, "../testdata/exercises", ps)
	t.Logf("lockstep observe:\n%s", out)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	k, err := kvmrecord.Read(filepath.Join(ps, "fixture_udp-fixture.abi10.json"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Verified || !strings.Contains(k.Aborted, "is not the file its record describes: its SHA-256 differs") || k.VerifiedCfgSHA256 != nil {
		t.Errorf("verified %v, aborted %q, verified_cfg_sha256 %v", k.Verified, k.Aborted, k.VerifiedCfgSHA256)
	}
	if _, err := os.Stat(filepath.Join(ps, "fixture_udp-fixture.abi10.cfg")); err == nil {
		t.Error("a sidecar was written for a failed exercise")
	}
	if !strings.Contains(out, "SHA-256 differs") {
		t.Error("the reason did not reach the output")
	}
}

// BenchmarkObserveGuest reports the observer's wall time for the fixture
// against its bare reference run in the same guest, and runs-host-s: the
// exercise's runs timed on this host from the guest's progress lines (what
// `make bench` reports as observe-fixture-runs-s; the guest's own seconds,
// guest-exercise-s, lose ticks under TCG on a loaded host).
func BenchmarkObserveGuest(b *testing.B) {
	needGuest(b)
	bin := lockstepbin.Build(b)
	exercises := "../testdata/exercises"
	b.ReportAllocs()
	for b.Loop() {
		ps := copyPathSet(b)
		var out stampedLines
		code, wall := observeKeyTo(b, bin, "fixture", exercises, ps, &out)
		if code != 0 {
			b.Fatalf("exit %d:\n%s", code, out.String())
		}
		// The exercise's runs on this host's clock: from the first
		// reference run's start to the exercise's verdict.
		runs, ok := out.between("udp-fixture: reference run 1/", "udp-fixture: verified")
		if !ok {
			b.Fatalf("no progress lines for the first reference run and the verdict:\n%s", out.String())
		}
		b.ReportMetric(runs.Seconds(), "runs-host-s")
		e := readRunJSON(b, ps).Exercises[0]
		var ref float64
		for _, s := range e.Reference {
			ref += s
		}
		ref /= float64(len(e.Reference))
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(e.Seconds, "guest-exercise-s")
		b.ReportMetric(ref, "reference-s")
		b.ReportMetric(e.Seconds/ref, "overhead-x")
	}
}
