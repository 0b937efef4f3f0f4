package exercise

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func TestParseConfig(t *testing.T) {
	full := `{
  "key": "java-gradle",
  "seed": "java.cfg",
  "kept_seed": "java-kept.cfg",
  "report_globs": ["build/test-results/**/*.xml"],
  "heap_pinned": true,
  "declared_hosts": ["repo.example.org:443", "ntp.example.org:123 udp"],
  "pinned_read_roots": [{"path": "/opt/gradle/caches", "manifest": "gradle.sha256"}],
  "runs_compiled_programs": true,
  "compiled_programs_directory": "build/bin",
  "uses_pseudo_terminals": false,
  "address_space_unbounded": true
}`
	want := Config{
		Key: "java-gradle", Seed: "java.cfg", KeptSeed: "java-kept.cfg", ReportGlobs: []string{"build/test-results/**/*.xml"},
		HeapPinned: true, DeclaredHosts: []string{"repo.example.org:443", "ntp.example.org:123 udp"},
		PinnedReadRoots:      []PinnedReadRoot{{Path: "/opt/gradle/caches", Manifest: "gradle.sha256"}},
		RunsCompiledPrograms: true, CompiledProgramsDirectory: "build/bin", AddressSpaceUnbounded: true,
	}
	got, err := ParseConfig([]byte(full))
	if err != nil {
		t.Fatalf("ParseConfig(full) = %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseConfig(full) = %+v, want %+v", got, want)
	}
	if c, err := ParseConfig([]byte(" {} \n")); err != nil || !reflect.DeepEqual(c, Config{}) {
		t.Errorf("ParseConfig({}) = %+v, %v; want the zero Config", c, err)
	}
}

func TestParseConfigRefusals(t *testing.T) {
	tests := []struct {
		Name string
		JSON string
		Want []string // substrings, one per expected problem, in sorted problem order
	}{
		{"array", `[]`, []string{"not a JSON object"}},
		{"string", `"generic"`, []string{"not a JSON object"}},
		{"null", `null`, []string{"not a JSON object"}},
		{"empty", ``, []string{"not a JSON object"}},
		{"trailing", `{} {}`, []string{"data after the object"}},
		{"cut", `{"key": "c"`, []string{"not a JSON object"}},
		{"duplicate", `{"key": "c", "key": "python"}`, []string{`key "key" appears twice`}},
		{"unknown keys named", `{"kept_seeds": 1, "report_glob": []}`,
			[]string{`unknown keys "kept_seeds", "report_glob"`}},
		{"kept seed", `{"kept_seed": "/etc/k.cfg"}`, []string{`kept_seed "/etc/k.cfg" is not a seed file name`}},
		{"kept seed number", `{"kept_seed": 1}`, []string{"kept_seed is a number, want a string"}},
		{"kept seed is the seed", `{"seed": "java.cfg", "kept_seed": "java.cfg"}`, []string{`kept_seed and seed both name "java.cfg"`}},
		{"bad key", `{"key": "Java_Gradle"}`, []string{`key "Java_Gradle" is not a key`}},
		{"key number", `{"key": 3}`, []string{"key is a number, want a string"}},
		{"bool as string", `{"heap_pinned": "yes"}`, []string{"heap_pinned is a string, want true or false"}},
		{"bool as number", `{"runs_compiled_programs": 1}`, []string{"runs_compiled_programs is a number, want true or false"}},
		{"seed", `{"seed": "../java.cfg"}`, []string{`seed "../java.cfg" is not a seed file name`}},
		{"seed ext", `{"seed": "java.conf"}`, []string{`seed "java.conf"`}},
		{"globs empty", `{"report_globs": []}`, []string{"report_globs is empty"}},
		{"globs string", `{"report_globs": "x.xml"}`, []string{"report_globs is a string, want a list of strings"}},
		{"globs element", `{"report_globs": [1]}`, []string{"a list with an element that is not a string"}},
		{"glob absolute", `{"report_globs": ["/tmp/*.xml"]}`, []string{"is absolute"}},
		{"glob climbs", `{"report_globs": ["../x/*.xml"]}`, []string{`or ".." part`}},
		{"glob bad pattern", `{"report_globs": ["a/[x.xml"]}`, []string{"syntax error in pattern"}},
		{"host upper", `{"declared_hosts": ["Repo.example.org:443"]}`, []string{"is not <lower-case dns name>:<port>"}},
		{"host port", `{"declared_hosts": ["repo.example.org:70000"]}`, []string{"want 1 to 65535"}},
		{"host no port", `{"declared_hosts": ["repo.example.org"]}`, []string{"is not <lower-case dns name>"}},
		{"host transport", `{"declared_hosts": ["a.org:53 sctp"]}`, []string{"is not <lower-case dns name>"}},
		{"pinned extra key", `{"pinned_read_roots": [{"path": "/opt/x", "manifest": "m", "sha": 1}]}`,
			[]string{`unknown key "sha"`}},
		{"pinned missing", `{"pinned_read_roots": [{"path": "/opt/x"}]}`, []string{"no manifest"}},
		{"pinned relative", `{"pinned_read_roots": [{"path": "opt/x", "manifest": "m"}]}`, []string{"not an absolute, normal path"}},
		{"pinned proc", `{"pinned_read_roots": [{"path": "/proc/self", "manifest": "m"}]}`, []string{"is in /proc"}},
		{"pinned manifest", `{"pinned_read_roots": [{"path": "/opt/x", "manifest": "../m"}]}`, []string{"is not a file name"}},
		{"pinned overlap", `{"pinned_read_roots": [{"path": "/opt/x", "manifest": "a"}, {"path": "/opt/x/y", "manifest": "b"}]}`,
			[]string{"overlap"}},
		{"compiled dir without flag", `{"compiled_programs_directory": "bin"}`, []string{"runs_compiled_programs is not true"}},
		{"compiled dir absolute", `{"runs_compiled_programs": true, "compiled_programs_directory": "/bin"}`,
			[]string{"not a normal relative path"}},
		{"compiled dir climbs", `{"runs_compiled_programs": true, "compiled_programs_directory": "../bin"}`,
			[]string{"not a normal relative path"}},
		{"every problem at once", `{"key": "A", "seed": 1, "heap_pinned": null, "x": 1}`, []string{
			"heap_pinned is null", `key "A" is not a key`, "seed is a number", `unknown keys "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.JSON))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig(%s) = %+v, %v; want a *ConfigError", tt.JSON, c, err)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("ParseConfig(%s) returned %+v with its error, want the zero Config", tt.JSON, c)
			}
			if len(ce.Problems) != len(tt.Want) {
				t.Fatalf("ParseConfig(%s) problems = %q, want %d like %q", tt.JSON, ce.Problems, len(tt.Want), tt.Want)
			}
			for i, w := range tt.Want {
				if !strings.Contains(ce.Problems[i], w) {
					t.Errorf("ParseConfig(%s) problem %d = %q, want it to contain %q", tt.JSON, i, ce.Problems[i], w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseConfig(%s).Error() has a line break: %q", tt.JSON, err)
			}
		})
	}
}

func TestParseDeclaredHost(t *testing.T) {
	tests := []struct {
		In   string
		Want DeclaredHost
		Rule string
	}{
		{"repo.maven.apache.org:443", DeclaredHost{"repo.maven.apache.org", 443, policy.TCP}, "allow repo.maven.apache.org:443"},
		{"ntp.example.org:123 udp", DeclaredHost{"ntp.example.org", 123, policy.UDP}, "allow ntp.example.org:123 udp"},
		{"localhost:8080 tcp", DeclaredHost{"localhost", 8080, policy.TCP}, "allow localhost:8080"},
	}
	for _, tt := range tests {
		got, err := ParseDeclaredHost(tt.In)
		if err != nil || got != tt.Want {
			t.Errorf("ParseDeclaredHost(%q) = %+v, %v; want %+v", tt.In, got, err, tt.Want)
			continue
		}
		if r := got.Rule().String(); r != tt.Rule {
			t.Errorf("ParseDeclaredHost(%q).Rule() = %q, want %q", tt.In, r, tt.Rule)
		}
	}
	for _, bad := range []string{"a.org:0", "a.org:080", "-a.org:80", "a..org:80", "a.org:80 UDP", "a.org: 80", ":80", "a.org:80  udp"} {
		if h, err := ParseDeclaredHost(bad); err == nil {
			t.Errorf("ParseDeclaredHost(%q) = %+v, nil; want an error", bad, h)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "exercises", "*", "*", ConfigFile))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"declared_hosts": ["a.b:1 udp"], "pinned_read_roots": [{"path": "/a", "manifest": "m"}]}`))
	f.Add([]byte(`{"key": "k", "key": "k"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !reflect.DeepEqual(c, Config{}) {
				t.Fatalf("ParseConfig returned %+v with error %v", c, err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("ParseConfig error %v is not a *ConfigError with problems", err)
			}
			return
		}
		// What parsed renders back to a prune.json that parses to the same.
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("ParseConfig(Marshal(%+v)) = %v", c, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip = %+v, want %+v", back, c)
		}
		for _, h := range c.DeclaredHosts {
			if _, err := ParseDeclaredHost(h); err != nil {
				t.Fatalf("accepted declared host %q does not parse: %v", h, err)
			}
		}
	})
}
