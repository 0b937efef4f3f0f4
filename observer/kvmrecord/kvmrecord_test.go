package kvmrecord

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/recordtest"
	"github.com/lockstep-sandbox/lockstep/record"
)

var update = flag.Bool("update", false, "rewrite the golden records in testdata/")

var testProvenance = record.Provenance{Pruner: record.PrunerName, Kernel: "7.2.13-lockstep", Architecture: "x86_64",
	LandlockABI: 10, UID: 0, Strace: "strace -- version 6.1", Date: "2026-11-29T08:44:42Z"}

func sampleKVM() *Record {
	cfgHash := record.SHA256Hex([]byte(recordtest.Cfg))
	// The audit line only has the shape of a LANDLOCK_ACCESS record; it is
	// not a capture (the observer package holds real ones).
	rows := []Row{{Rule: "allow 5000 udp", Audit: []string{`type=1423 audit(1764405882.123:42): domain=1a2b blockers=net.bind_udp pid=77 comm="python3" sport=5000`}}}
	side := record.SHA256Hex(Sidecar("fixture", "udp-fixture", testProvenance, rows))
	return &Record{SchemaVersion: Schema, Key: "fixture", Exercise: "udp-fixture", Provenance: testProvenance,
		Kernel: "7.2.13-lockstep", LandlockABI: 10, VerifiedCfgSHA256: &cfgHash, ABI10CfgSHA256: &side,
		CrossCheck: &CrossCheck{StraceDenials: 4, AuditRecords: 4, Unparsed: []string{}, Mismatches: []Mismatch{}, AuditOnly: []AuditOnly{}},
		Mismatches: []Mismatch{}, AuditOnly: []AuditOnly{}, Rows: rows, Verified: true}
}

func TestKVMRecord(t *testing.T) {
	r := sampleKVM()
	dir := t.TempDir()
	path, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	recordtest.Golden(t, "fixture_udp-fixture.abi10.json", data, *update)
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := record.Marshal(back); !bytes.Equal(again, data) {
		t.Errorf("record.Marshal(Read(f)) differs from f")
	}
	side := Sidecar("fixture", "udp-fixture", testProvenance, r.Rows)
	recordtest.Golden(t, "fixture_udp-fixture.abi10.cfg", side, *update)
	if _, err := policy.Parse("sidecar", side); err != nil {
		t.Errorf("the sidecar does not parse as a policy: %v", err)
	}
	if err := back.Vouches([]byte(recordtest.Cfg), side); err != nil {
		t.Errorf("Vouches = %v", err)
	}
	if err := back.Vouches([]byte(recordtest.Cfg), []byte("[bind]\nallow 6000 udp\n")); err == nil || !strings.Contains(err.Error(), "SHA-256 differs") {
		t.Errorf("Vouches(tampered sidecar) = %v, want a SHA-256 refusal", err)
	}
	if err := back.Vouches([]byte("[read]\n/\n"), side); err == nil {
		t.Errorf("Vouches(another cfg) = nil, want a refusal")
	}
	if strings.Contains(string(data), `"aborted"`) || strings.Contains(string(data), `"evidence"`) {
		t.Errorf("a verified KVM record holds aborted/evidence:\n%s", data)
	}

	// An abort: null hashes, no cross_check, evidence {} even when empty.
	ab := &Record{SchemaVersion: Schema, Key: "fixture", Exercise: "udp-fixture", Provenance: testProvenance,
		Kernel: "7.2.13-lockstep", LandlockABI: 10, Mismatches: []Mismatch{}, AuditOnly: []AuditOnly{}, Rows: []Row{},
		Aborted: "a defect of the pruner: Indeterminate: the sentinel record did not arrive within 60 s"}
	out, err := record.Marshal(ab)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"abi10_cfg_sha256": null`, `"verified_cfg_sha256": null`, `"evidence": {}`, `"verified": false`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("aborted KVM record lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "cross_check") {
		t.Errorf("aborted KVM record holds cross_check:\n%s", out)
	}
	if back, err := Parse("x", out); err != nil || back.Aborted != ab.Aborted {
		t.Errorf("Parse(aborted) = %+v, %v", back, err)
	}
}

func TestKVMValidation(t *testing.T) {
	tests := []struct {
		Name   string
		Mutate func(*Record)
		Want   string
	}{
		{"abi", func(r *Record) { r.LandlockABI = 9 }, "verified on Landlock ABI 9"},
		{"mismatches", func(r *Record) { r.Mismatches = []Mismatch{{Operation: "openat"}} }, "verified with 1 mismatches"},
		{"row", func(r *Record) { r.Rows[0].Rule = "allow 5000" }, "is not allow <port> udp"},
		{"port", func(r *Record) { r.Rows[0].Rule = "allow 70000 udp" }, "above 65535"},
		{"row audit", func(r *Record) { r.Rows[0].Audit = nil }, "no audit record"},
		{"verified aborted", func(r *Record) { r.Aborted = "x" }, "verified but aborted"},
		{"hash", func(r *Record) { s := "abc"; r.ABI10CfgSHA256 = &s }, "abi10_cfg_sha256"},
		{"schema", func(r *Record) { r.SchemaVersion = 2 }, "schema_version is 2, want 1"},
		{"no cross check", func(r *Record) { r.CrossCheck = nil }, "without a cross_check"},
		{"root digest", func(r *Record) { r.Provenance.RootDigest = "sha256:ABC" }, "provenance.root_digest"},
		{"bare root digest", func(r *Record) { r.Provenance.RootDigest = strings.Repeat("a", 64) }, "provenance.root_digest"},
		{"time factor", func(r *Record) { r.TimeFactor = -2 }, "time_factor -2 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			r := sampleKVM()
			tt.Mutate(r)
			if err := r.Validate(); err == nil || !strings.Contains(err.Error()+strings.Join(err.(*record.ValidationError).Problems, "\n"), tt.Want) {
				t.Errorf("Validate() = %v, want a problem %q", err, tt.Want)
			}
		})
	}
}

// TestMarshalMatchesPython holds a KVM record's bytes to Python's own
// json.dumps(indent=2, sort_keys=True), run on this machine.
func TestMarshalMatchesPython(t *testing.T) {
	ours, err := record.Marshal(sampleKVM())
	if err != nil {
		t.Fatal(err)
	}
	recordtest.MatchesPython(t, ours)
}

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "fixture_udp-fixture.abi10.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := Parse("f", data)
		if err != nil {
			if k != nil {
				t.Fatalf("Parse returned a record with error %v", err)
			}
			return
		}
		out, err := record.Marshal(k)
		if err != nil {
			t.Fatalf("Marshal(parsed) = %v", err)
		}
		back, err := Parse("f", out)
		if err != nil {
			t.Fatalf("Parse(Marshal(parsed)) = %v\n%s", err, out)
		}
		if again, _ := record.Marshal(back); !bytes.Equal(again, out) {
			t.Fatalf("Marshal is not stable:\n%s\n%s", out, again)
		}
	})
}
