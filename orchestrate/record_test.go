package orchestrate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/record"
)

// fixtureRecords builds the fixture's records and sidecar with the record
// package's own writers, from the hand-written .cfg files: what the pruner
// and the observer write for these policies. The audit line is the one
// captured in testdata/audit/phobos-linux-7.2.9.dmesg.
func fixtureRecords(t *testing.T) map[string][]byte {
	t.Helper()
	prune := record.Provenance{Pruner: record.PrunerName, Kernel: "6.12.0-28-amd64", Architecture: "x86_64",
		LandlockABI: 7, UID: 0, Strace: "strace -- version 6.1", Date: "2026-11-20T10:00:00Z"}
	kvm := prune
	kvm.Kernel, kvm.LandlockABI, kvm.Date = "7.2.13", 10, "2026-11-21T08:00:00Z"
	rows := map[string][]kvmrecord.Row{"java_two": {{
		Rule:  "allow 5000 udp",
		Audit: []string{"[   10.814152] audit: type=1423 audit(1791375760.016:59): domain=119fe767d blockers=net.bind_udp saddr=127.0.0.1 src=5000"},
	}}}
	out := map[string][]byte{}
	dir := t.TempDir()
	for _, stem := range []string{"java_one", "java_two", "python_basic"} {
		key, ex, _ := strings.Cut(stem, "_")
		cfg, err := os.ReadFile(filepath.Join(fixtureDir, stem+".cfg"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Parse(stem+".cfg", cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := &record.Exercise{SchemaVersion: record.ExerciseSchema, Key: key, Exercise: ex, Stage: record.StageAll,
			Provenance: prune, CfgSHA256: record.SHA256Hex(cfg), Policy: record.FromPolicy(p, nil),
			Log: []record.Entry{record.MustEntry("seed", map[string]any{"name": key, "rows": 1})}}
		path, err := record.WriteExercise(dir, r)
		if err != nil {
			t.Fatalf("%s: %v", stem, err)
		}
		if out[stem+".json"], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		if key != "java" {
			continue
		}
		h := record.SHA256Hex(cfg)
		k := &kvmrecord.Record{SchemaVersion: kvmrecord.Schema, Key: key, Exercise: ex, Provenance: kvm, Kernel: kvm.Kernel,
			LandlockABI: 10, VerifiedCfgSHA256: &h,
			CrossCheck: &kvmrecord.CrossCheck{StraceDenials: 3, AuditRecords: 3, Unparsed: []string{},
				Mismatches: []kvmrecord.Mismatch{}, AuditOnly: []kvmrecord.AuditOnly{}},
			Mismatches: []kvmrecord.Mismatch{}, AuditOnly: []kvmrecord.AuditOnly{}, Rows: []kvmrecord.Row{}, Verified: true}
		if rs := rows[stem]; len(rs) > 0 {
			side := kvmrecord.Sidecar(key, ex, kvm, rs)
			sh := record.SHA256Hex(side)
			k.Rows, k.ABI10CfgSHA256 = rs, &sh
			out[stem+".abi10.cfg"] = side
		}
		if path, err = kvmrecord.Write(dir, k); err != nil {
			t.Fatalf("%s: %v", stem, err)
		}
		if out[stem+".abi10.json"], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFixtureRecords: the committed records and sidecar are exactly what the
// record package writes for the fixture's .cfg files (go test -update
// rewrites them), and the record package's readers accept them.
func TestFixtureRecords(t *testing.T) {
	for name, want := range fixtureRecords(t) {
		p := filepath.Join(fixtureDir, name)
		if *update {
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the record package writes (go test -update, then review)", name)
		}
	}
	for _, stem := range []string{"java_one", "java_two", "python_basic"} {
		r, err := record.ReadExercise(filepath.Join(fixtureDir, stem+".json"))
		if err != nil {
			t.Fatalf("%s.json: %v", stem, err)
		}
		cfg, _ := os.ReadFile(filepath.Join(fixtureDir, stem+".cfg"))
		if err := r.Vouches(cfg); err != nil {
			t.Errorf("%s.json: %v", stem, err)
		}
	}
	for _, stem := range []string{"java_one", "java_two"} {
		k, err := kvmrecord.Read(filepath.Join(fixtureDir, stem+".abi10.json"))
		if err != nil {
			t.Fatalf("%s.abi10.json: %v", stem, err)
		}
		cfg, _ := os.ReadFile(filepath.Join(fixtureDir, stem+".cfg"))
		side, err := os.ReadFile(filepath.Join(fixtureDir, stem+".abi10.cfg"))
		if err != nil {
			side = nil
		}
		if err := k.Vouches(cfg, side); err != nil {
			t.Errorf("%s.abi10.json: %v", stem, err)
		}
	}
}
