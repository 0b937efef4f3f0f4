package machine

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// docFields reads the field table of docs/probe.md: field → type.
func docFields(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "probe.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		out[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	if len(out) == 0 {
		t.Fatal("docs/probe.md has no field table")
	}
	return out
}

// flatten maps every field of a decoded JSON document to its schema type.
func flatten(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if prefix != "" {
			out[prefix] = "object"
		}
		for k, e := range v {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, e, out)
		}
	case []any:
		elem := "?" // empty: any element type
		if len(v) > 0 {
			m := map[string]string{}
			flatten("x", v[0], m)
			elem = m["x"]
		}
		out[prefix] = elem + "[]"
	case string:
		out[prefix] = "string"
	case bool:
		out[prefix] = "boolean"
	case float64:
		out[prefix] = "integer"
		if v != float64(int64(v)) {
			out[prefix] = "number"
		}
	case nil:
		out[prefix] = "null"
	}
}

// TestSchemaDocumented checks this machine's probe document against
// docs/probe.md in both directions.
func TestSchemaDocumented(t *testing.T) {
	f := Probe(t.Context())
	f.Cgroup.EnforcerCaps = "v1" // filled by the caller (cmd/lockstep) in real use
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	flatten("", doc, got)
	want := docFields(t)
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("probe --json field %q (%s) is not documented in docs/probe.md", k, got[k])
		case got[k] == "?[]" && strings.HasSuffix(w, "[]"):
		case got[k] != w:
			t.Errorf("field %q has type %s, docs/probe.md says %s", k, got[k], w)
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("docs/probe.md documents %q, which probe --json lacks", k)
		}
	}
	if doc["schema_version"] != float64(SchemaVersion) {
		t.Errorf("schema_version = %v, want %d", doc["schema_version"], SchemaVersion)
	}
}

// TestProbeThisMachine checks the facts against what this machine is known
// to have (Landlock ABI 7+ on the development machine; the tests need it).
func TestProbeThisMachine(t *testing.T) {
	f := Probe(t.Context())
	if f.Landlock.Error != "" || f.Landlock.ABI < 1 {
		t.Errorf("Landlock = %+v, want an ABI (lockstep's host-kernel tests need Landlock)", f.Landlock)
	}
	if f.LSM.Readable && f.Landlock.ABI > 0 && !f.LSM.Landlock {
		t.Errorf("LSM list %v lacks landlock although the ABI is %d", f.LSM.List, f.Landlock.ABI)
	}
	if f.Kernel.Release == "" || f.Kernel.Machine == "" {
		t.Errorf("Kernel = %+v, want uname's release and machine", f.Kernel)
	}
	if _, err := os.Stat("/dev/kvm"); (err == nil) != f.KVM.Present {
		t.Errorf("KVM.Present = %v, stat /dev/kvm: %v", f.KVM.Present, err)
	}
	if f.Audit.Available == (f.Audit.Error != "") {
		t.Errorf("Audit = %+v: available and error must disagree", f.Audit)
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		file, prefix, want string
	}{
		{"qemu-version.txt", "QEMU emulator version ", "7.2.22"},
		{"strace-version.txt", "strace -- version ", "6.1"},
	} {
		out, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := parseVersion(out, tc.prefix); got != tc.want || err != nil {
			t.Errorf("parseVersion(%s) = %q, %v; want %q", tc.file, got, err, tc.want)
		}
	}
	if _, err := parseVersion([]byte("something else\n"), "QEMU emulator version "); err == nil {
		t.Error("parseVersion of unrelated output: no error, want one")
	}
}

func TestProbeLSMAndPtrace(t *testing.T) {
	d := t.TempDir()
	lsm := filepath.Join(d, "lsm")
	os.WriteFile(lsm, []byte("lockdown,capability,landlock,bpf"), 0o644)
	if got := probeLSM(lsm); !got.Readable || !got.Landlock || !reflect.DeepEqual(got.List, []string{"lockdown", "capability", "landlock", "bpf"}) {
		t.Errorf("probeLSM = %+v", got)
	}
	if got := probeLSM(filepath.Join(d, "absent")); got.Readable || got.Error == "" {
		t.Errorf("probeLSM(absent) = %+v, want unreadable with an error", got)
	}
	ps := filepath.Join(d, "ptrace_scope")
	os.WriteFile(ps, []byte("1\n"), 0o644)
	if got := probePtrace(ps); got.YamaScope != 1 || got.Error != "" {
		t.Errorf("probePtrace = %+v, want 1", got)
	}
	if got := probePtrace(filepath.Join(d, "absent")); got.YamaScope != -1 || got.Error != "" {
		t.Errorf("probePtrace(absent) = %+v, want -1 (Yama absent) without error", got)
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, name := range []string{"qemu-version.txt", "strace-version.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "QEMU emulator version ")
		f.Add(data, "strace -- version ")
	}
	f.Fuzz(func(t *testing.T, out []byte, prefix string) {
		v, err := parseVersion(out, prefix)
		if (err == nil) == (v == "") {
			t.Errorf("parseVersion = %q, %v: want a version xor an error", v, err)
		}
		if strings.ContainsAny(v, " \t\n") {
			t.Errorf("parseVersion = %q, want one word", v)
		}
	})
}

func TestParseMeminfoMB(t *testing.T) {
	in := []byte("MemTotal:        2048000 kB\nMemFree:  100 kB\nMemAvailable:   1024000 kB\nSwapTotal:       1024000 kB\nbroken\n")
	got := parseMeminfoMB(in, []string{"MemTotal", "SwapTotal", "MemAvailable", "Missing"})
	want := map[string]int64{"MemTotal": 2000, "SwapTotal": 1000, "MemAvailable": 1000}
	if len(got) != len(want) {
		t.Errorf("parseMeminfoMB = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseMeminfoMB[%s] = %d, want %d", k, got[k], v)
		}
	}
	if got := parseMeminfoMB([]byte("garbage"), []string{"MemTotal"}); len(got) != 0 {
		t.Errorf("parseMeminfoMB(garbage) = %v, want nothing", got)
	}
}
