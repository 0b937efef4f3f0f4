package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/machine"
)

// TestProbeVerb: `lockstep probe --json` prints exactly one document with the
// schema version and the field the verb fills itself; the table names every
// fact.
func TestProbeVerb(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"probe", "--json"}, &stdio{out: &out, err: &errb}); code != exitOK {
		t.Fatalf("probe --json = %d, stderr %s", code, errb.String())
	}
	dec := json.NewDecoder(&out)
	var f machine.Facts
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("probe --json: %v", err)
	}
	if dec.More() {
		t.Error("probe --json printed more than one document")
	}
	if f.SchemaVersion != machine.SchemaVersion || f.Cgroup.EnforcerCaps == "" {
		t.Errorf("schema_version %d, enforcer_caps %q; want %d and a value", f.SchemaVersion, f.Cgroup.EnforcerCaps, machine.SchemaVersion)
	}
	out.Reset()
	if code := run(t.Context(), []string{"probe"}, &stdio{out: &out, err: &errb}); code != exitOK {
		t.Fatalf("probe = %d", code)
	}
	for _, k := range []string{"kernel", "landlock", "lsm", "audit", "kvm", "qemu", "strace", "cgroup", "ptrace"} {
		if !strings.Contains(out.String(), "\n"+k+" ") && !strings.HasPrefix(out.String(), k+" ") {
			t.Errorf("probe table lacks a %q row:\n%s", k, out.String())
		}
	}
	if code := run(t.Context(), []string{"probe", "extra"}, &stdio{out: &out, err: &errb}); code != exitUsage {
		t.Errorf("probe extra = %d, want %d", code, exitUsage)
	}
}
