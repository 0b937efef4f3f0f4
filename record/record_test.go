package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/internal/recordtest"
	"github.com/lockstep-sandbox/lockstep/internal/version"
)

var update = flag.Bool("update", false, "rewrite the golden records in testdata/")

// capturedVerdict judges a real run of the generic reference exercise,
// captured by evidence/verdict/testdata/capture.sh.
func capturedVerdict(t testing.TB, name string) verdict.Verdict {
	t.Helper()
	dir := filepath.Join("..", "evidence", "verdict", "testdata", "runs", name)
	st, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	status, _ := strconv.Atoi(strings.TrimSpace(string(st)))
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "reports", "test-reports", "*.xml"))
	r := verdict.Run{Status: status, Log: log}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r.Reports = append(r.Reports, verdict.Report{Path: "test-reports/" + filepath.Base(f), Data: data})
	}
	return verdict.Judge(r)
}

var testProvenance = Provenance{Pruner: PrunerName, Kernel: "7.2.13-lockstep", Architecture: "x86_64",
	LandlockABI: 10, UID: 0, Strace: "strace -- version 6.1", Date: "2026-11-29T08:44:42Z"}

func sampleExercise(t testing.TB) (*Exercise, []byte) {
	t.Helper()
	p, err := policy.Parse("generic_shell-reference.cfg", []byte(recordtest.Cfg))
	if err != nil {
		t.Fatal(err)
	}
	p.Header = CfgHeader("generic", "shell-reference", StageAll, testProvenance)
	p.Comments = map[string]string{"/usr": "read of the toolchain, café ☕"}
	cfg := p.Render()
	v := capturedVerdict(t, "generic-pass")
	log := []Entry{
		MustEntry("baseline", BaselineEntry{Attempt: 1, Status: 0, Verdict: v}),
		MustEntry("permissive", RunEntry{Run: 1, Shape: "OBSERVED_NETWORK", Status: 0, Verdict: v, Seconds: 2.5}),
		MustEntry("filesystem minimisation", MinimisationEntry{Before: 5, Kept: 4, Trials: 5, Runs: 7, Removed: []string{"/tmp"}}),
		MustEntry("containment", ContainmentEntry{Checks: []ContainmentCheck{
			{Name: "canary read", Arguments: []string{"/root/lockstep-canary"}, Control: "ok", Refused: true},
			{Name: "nproc", Unchecked: "nproc is not checked as uid 0"},
		}}),
		MustEntry("grow", map[string]any{"rounds": 3, "grants": []string{"[read] /usr"}}),
	}
	return &Exercise{SchemaVersion: ExerciseSchema, Key: "generic", Exercise: "shell-reference", Stage: StageAll,
		Provenance: testProvenance, CfgSHA256: SHA256Hex(cfg), Policy: FromPolicy(p, []string{"a note"}), Log: log}, cfg
}

func TestExerciseRecordRoundTrip(t *testing.T) {
	r, cfg := sampleExercise(t)
	dir := t.TempDir()
	path, err := WriteExercise(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "generic_shell-reference.json" {
		t.Errorf("WriteExercise wrote %s, want generic_shell-reference.json", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recordtest.Golden(t, "generic_shell-reference.json", data, *update)
	back, err := ReadExercise(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("Marshal(ReadExercise(f)) differs from f:\n%s", again)
	}
	if err := back.Vouches(cfg); err != nil {
		t.Errorf("Vouches(the cfg) = %v", err)
	}
	if err := back.Vouches(append(cfg, '\n')); err == nil || !strings.Contains(err.Error(), "its SHA-256 differs") {
		t.Errorf("Vouches(another cfg) = %v, want a SHA-256 refusal", err)
	}
	var run RunEntry
	want := capturedVerdict(t, "generic-pass")
	if err := back.Log[1].Decode(&run); err != nil {
		t.Fatal(err)
	}
	if run.Run != 1 || run.Shape != "OBSERVED_NETWORK" || run.Seconds != 2.5 || !run.Verdict.Same(want) {
		t.Errorf("Decode(log[1]) = %+v, want run 1, OBSERVED_NETWORK, 2.5 s, the captured verdict", run)
	}
	if err := back.Shippable(); err != nil {
		t.Errorf("Shippable() = %v", err)
	}
	for _, ent := range []string{".generic_shell-reference.json.tmp"} {
		if _, err := os.Stat(filepath.Join(dir, ent)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temporary file %s left behind: %v", ent, err)
		}
	}
}

func TestAbortedRecord(t *testing.T) {
	r, _ := sampleExercise(t)
	a := &Aborted{SchemaVersion: ExerciseSchema, Key: "broken", Exercise: "failing-test", Stage: StageAll,
		Aborted:  "the reference fails its own tests: failing-test.test_arithmetic failed (exit class tests-failed)",
		Evidence: map[string]any{"record": r.Log[:1], "verdict": capturedVerdict(t, "broken-fail")}, Provenance: testProvenance}
	dir := t.TempDir()
	path, err := WriteAborted(dir, a)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recordtest.Golden(t, "broken_failing-test.aborted.json", data, *update)
	back, err := ReadAborted(path)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Marshal(back); !bytes.Equal(again, data) {
		t.Errorf("Marshal(ReadAborted(f)) differs from f")
	}
	if _, err := ReadExercise(path); err == nil {
		t.Errorf("ReadExercise(an abort record) = nil error, want a refusal")
	}
}

func TestValidationRefusals(t *testing.T) {
	tests := []struct {
		Name   string
		Mutate func(*Exercise)
		Want   string
	}{
		{"schema", func(r *Exercise) { r.SchemaVersion = 1 }, "schema_version is 1, want 2"},
		{"key", func(r *Exercise) { r.Key = "Generic" }, `key "Generic" is not a key`},
		{"exercise", func(r *Exercise) { r.Exercise = "a/b" }, "is not an exercise folder name"},
		{"stage", func(r *Exercise) { r.Stage = "done" }, `stage "done"`},
		{"sha prefix", func(r *Exercise) { r.CfgSHA256 = "sha256:" + r.CfgSHA256[:57] }, "not a lower-case hex SHA-256"},
		{"sha upper", func(r *Exercise) { r.CfgSHA256 = strings.ToUpper(r.CfgSHA256) }, "not a lower-case hex SHA-256"},
		{"date", func(r *Exercise) { r.Provenance.Date = "2026-11-29 08:44:42" }, "provenance.date"},
		{"section", func(r *Exercise) { r.Policy.FS["/usr"] = []string{"read", "fly"} }, `section "fly"`},
		{"order", func(r *Exercise) { r.Policy.FS["/usr"] = []string{"write", "read"} }, "not sorted without repeats"},
		{"repeat", func(r *Exercise) { r.Policy.FS["/usr"] = []string{"read", "read"} }, "not sorted without repeats"},
		{"relative", func(r *Exercise) { r.Policy.FS["usr"] = []string{"read"} }, "not absolute"},
		{"limit", func(r *Exercise) { r.Policy.Limits["ram"] = "1" }, `key "ram"`},
		{"unsorted", func(r *Exercise) { r.Policy.Connect = []string{"allow b:1", "allow a:1"} }, "sorted"},
		{"no log", func(r *Exercise) { r.Log = nil }, "log is missing"},
		{"nil policy list", func(r *Exercise) { r.Policy.Notes = nil }, "policy lacks"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			r, _ := sampleExercise(t)
			tt.Mutate(r)
			err := r.Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if !strings.Contains(strings.Join(ve.Problems, "\n"), tt.Want) {
				t.Errorf("Validate() Problems %q lack %q", ve.Problems, tt.Want)
			}
			if _, err := WriteExercise(t.TempDir(), r); err == nil {
				t.Errorf("WriteExercise wrote an invalid record")
			}
			// The same refusal when the bytes are read back.
			data, err := Marshal(r)
			if err != nil {
				return
			}
			if _, err := ParseExercise("x.json", data); err == nil {
				t.Errorf("ParseExercise accepted an invalid record")
			}
		})
	}
	r, _ := sampleExercise(t)
	data, _ := Marshal(r)
	for name, bad := range map[string][]byte{
		"unknown field":  bytes.Replace(data, []byte(`"key":`), []byte(`"kye": 1, "key":`), 1),
		"trailing":       append(append([]byte{}, data...), '{', '}'),
		"not utf8":       append(append([]byte{}, data[:len(data)-2]...), 0xff, '}'),
		"entry no stage": bytes.Replace(data, []byte(`"stage": "grow"`), []byte(`"stag": "grow"`), 1),
	} {
		if _, err := ParseExercise(name, bad); err == nil {
			t.Errorf("ParseExercise(%s) = nil error, want a refusal", name)
		}
	}
	// A record whose file name does not match its content.
	dir := t.TempDir()
	wrong := filepath.Join(dir, "python_shell-reference.json")
	if err := os.WriteFile(wrong, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadExercise(wrong); err == nil || !strings.Contains(err.Error(), "its name must be generic_shell-reference.json") {
		t.Errorf("ReadExercise(misnamed) = %v, want a name refusal", err)
	}
	// Every problem at once.
	r.SchemaVersion, r.Key, r.Stage = 3, "X", "x"
	var ve *ValidationError
	if err := r.Validate(); !errors.As(err, &ve) || len(ve.Problems) != 3 || strings.Contains(err.Error(), "\n") {
		t.Errorf("Validate(three Problems) = %v, want three Problems on one line", err)
	}
}

// TestMarshalMatchesPython holds Marshal to Python's own
// json.dumps(indent=2, sort_keys=True), run on this machine.
func TestMarshalMatchesPython(t *testing.T) {
	r, _ := sampleExercise(t)
	values := map[string]any{
		"record": r,
		"strings": map[string]any{"ascii": "plain <&> / '", "latin": "café", "emoji": "rocket 🚀", "ctl": "\x00\x01\x1f\x7f\b\f\n\r\t",
			"seps": "\u2028\u2029", "quote": `"\`, "é-key": 1, "Z": 2, "a": []any{}, "b": map[string]any{}},
		"numbers": []any{0, -1, 1 << 53, Seconds(3), Seconds(0.1), Seconds(2.5e-7), Seconds(1e16), Seconds(123456.789),
			Seconds(-0.0001), Seconds(1.5e300), Seconds(0)},
		"nested": []any{[]any{[]any{}}, map[string]any{"x": nil, "y": true, "z": false}},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			ours, err := Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			recordtest.MatchesPython(t, ours)
		})
	}
}

func TestPyFloat(t *testing.T) {
	tests := map[float64]string{3: "3.0", 0.1: "0.1", 2.5e-7: "2.5e-07", 1e16: "1e+16", 9999999999999998: "9999999999999998.0",
		0.0001: "0.0001", 0.00001: "1e-05", -2.5: "-2.5", 1e22: "1e+22", 123456.789: "123456.789", 1.5e300: "1.5e+300"}
	for f, want := range tests {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", f, got, want)
		}
	}
	if _, err := Seconds(math.NaN()).MarshalJSON(); err == nil {
		t.Errorf("Seconds(NaN).MarshalJSON() = nil error")
	}
}

func TestCfgHeader(t *testing.T) {
	h := CfgHeader("c", "make-reference", StageFilesystem, testProvenance)
	want := []string{
		"Pruned by the lockstep layer pruner for c/make-reference on 2026-11-29T08:44:42Z, stage filesystem.",
		"Kernel 7.2.13-lockstep (x86_64), Landlock ABI 10, uid 0, strace -- version 6.1.",
		"Every grant rests on a refusal the grading layers recorded, except the [connect] rules of the declared hosts; see the .json beside this file.",
		"Not verified jointly and not checked for containment: not a policy to ship.",
	}
	if strings.Join(h, "\n") != strings.Join(want, "\n") {
		t.Errorf("CfgHeader = %q, want %q", h, want)
	}
	p := NewProvenance(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 7, "absent")
	if p.Date != "2026-01-02T03:04:05Z" || p.Kernel == "" || p.Architecture == "" || p.Pruner != PrunerName {
		t.Errorf("NewProvenance = %+v", p)
	}
}

// TestProvenanceNamesLockstep: a record says which lockstep made it, and
// the strict reader takes the field back.
func TestProvenanceNamesLockstep(t *testing.T) {
	p := NewProvenance(time.Now(), 10, "absent")
	if p.Lockstep == "" || p.Lockstep != version.String() {
		t.Fatalf("NewProvenance().Lockstep = %q, want %q", p.Lockstep, version.String())
	}
	r, _ := sampleExercise(t)
	r.Provenance.Lockstep = p.Lockstep
	path, err := WriteExercise(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadExercise(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Provenance.Lockstep != p.Lockstep {
		t.Errorf("read back provenance.lockstep %q, want %q", back.Provenance.Lockstep, p.Lockstep)
	}
}

func TestEntry(t *testing.T) {
	if _, err := NewEntry("x", []int{1}); err == nil {
		t.Errorf("NewEntry(list) = nil error, want one")
	}
	e := MustEntry("grow", map[string]any{"stage": "ignored", "rounds": 2})
	b, err := json.Marshal(e)
	if err != nil || string(b) != `{"rounds":2,"stage":"grow"}` {
		t.Errorf("json.Marshal(entry) = %s, %v", b, err)
	}
	for _, bad := range []string{`[]`, `{"rounds": 2}`, `{"stage": 3}`, `{"stage": ""}`, `null`} {
		var e Entry
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("json.Unmarshal(%s, &Entry) = nil error", bad)
		}
	}
}

func FuzzParseExercise(f *testing.F) {
	for _, name := range []string{"generic_shell-reference.json", "broken_failing-test.aborted.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(kind string, v any, err error, parse func([]byte) (any, error)) {
			if err != nil {
				return
			}
			out, err := Marshal(v)
			if err != nil {
				t.Fatalf("%s: Marshal(parsed) = %v", kind, err)
			}
			back, err := parse(out)
			if err != nil {
				t.Fatalf("%s: Parse(Marshal(parsed)) = %v\n%s", kind, err, out)
			}
			again, _ := Marshal(back)
			if !bytes.Equal(again, out) {
				t.Fatalf("%s: Marshal is not stable:\n%s\n%s", kind, out, again)
			}
		}
		e, err := ParseExercise("f", data)
		if err != nil && e != nil {
			t.Fatalf("ParseExercise returned a record with error %v", err)
		}
		check("exercise", e, err, func(b []byte) (any, error) { return ParseExercise("f", b) })
		a, err := ParseAborted("f", data)
		if err != nil && a != nil {
			t.Fatalf("ParseAborted returned a record with error %v", err)
		}
		check("aborted", a, err, func(b []byte) (any, error) { return ParseAborted("f", b) })
	})
}

// A record's policy.fs lists are sets, written sorted as Phobos writes them;
// a record of either order (sorted, or lockstep's canonical section order
// of before) is read.
func TestPolicyFSSorted(t *testing.T) {
	p, err := policy.Parse("x.cfg", []byte("[read]\n/usr\n[execute]\n/usr\n[write]\n/tmp\n[create]\n/tmp\n[delete]\n/tmp\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := FromPolicy(p, nil).FS
	want := map[string][]string{"/usr": {"execute", "read"}, "/tmp": {"create", "delete", "write"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FromPolicy(...).FS = %v; want %v", got, want)
	}
	r, _ := sampleExercise(t)
	path, err := WriteExercise(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var written struct {
		Policy struct {
			FS map[string][]string `json:"fs"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	for path, secs := range written.Policy.FS {
		if !sort.StringsAreSorted(secs) {
			t.Errorf("written policy.fs[%q] = %v; want it sorted", path, secs)
		}
	}
	if secs := written.Policy.FS["/var/tmp/testing-dir"]; !reflect.DeepEqual(secs, []string{"create", "write"}) {
		t.Errorf("written policy.fs[/var/tmp/testing-dir] = %v; want [create write]", secs)
	}
	for _, order := range [][]string{{"create", "write"}, {"write", "create"}} {
		r, _ := sampleExercise(t)
		r.Policy.FS["/var/tmp/testing-dir"] = order
		if err := r.Validate(); err != nil {
			t.Errorf("a record with policy.fs[/var/tmp/testing-dir] = %v is refused: %v", order, err)
		}
	}
}
