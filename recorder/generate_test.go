package recorder

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRecording writes sessions as a recording's session directories and
// returns the recording.
func writeRecording(t *testing.T, sessions ...*SessionRecord) string {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "rec")
	for _, s := range sessions {
		d, err := nextSessionDir(rec)
		if err != nil {
			t.Fatal(err)
		}
		if s.Schema == 0 {
			s.Schema = SessionSchema
		}
		b, _ := json.Marshal(s)
		if err := os.WriteFile(filepath.Join(d, SessionFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

// session is a session that found /w (the working directory) and /w/in.txt
// before it ran, with uses.
func session(uses ...Use) *SessionRecord {
	return &SessionRecord{Command: []string{"prog"}, WorkDir: "/w",
		Existed: []Entry{{Path: "/", Dir: true}, {Path: "/var", Dir: true}, {Path: "/var/w", Dir: true}, {Path: "/var/w/in.txt"}},
		Uses:    uses}
}

func fsUse(line int, op string, needs ...Need) Use {
	return Use{Line: line, Call: op + "(…)", Layer: "filesystem", Op: op, Needs: needs, PID: 7, TGID: 7}
}

func need(p string, secs ...string) Need { return Need{Path: p, Sections: secs} }

func TestGenerateStatuses(t *testing.T) {
	read := fsUse(1, "read", need("/var/w/in.txt", "read"))
	create := fsUse(2, "create", need("/var/w", "create"), need("/var/w/out.txt", "write"))
	for _, tc := range []struct {
		name   string
		uses   []Use
		status int
		rows   []string
	}{
		{"a read and a create", []Use{read, create}, StatusOK, []string{"[read]\n/var/w\n", "[write]\n/var/w\n", "[create]\n/var/w\n"}},
		// A name no policy line can carry is widened to its nearest
		// nameable directory, here one the session made itself.
		{"a read widened onto a created directory", []Use{
			fsUse(1, "mkdir", need("/var/w", "create")),
			fsUse(2, "read", need("/var/w/new/a*b", "read"))}, StatusCreatedRead, []string{"[read]\n# widened", "\n/var/w/new\n"}},
		{"a link-local connect held by address", []Use{read, {Line: 3, Call: "connect(…)", Layer: "network", Op: "connect",
			Net: []Net{{Section: "connect", Addr: netip.MustParseAddr("fe80::1%eth0"), Port: 80, Transport: "tcp"}}}}, StatusRefused, nil},
		{"a device ioctl", []Use{read, {Line: 4, Call: "ioctl(…)", Layer: "fixed", Op: "ioctl", Reason: "a device ioctl (X on /dev/sda)", Paths: []string{"/dev/sda"}}},
			StatusIncomplete, []string{"# INCOMPLETE", "# not grantable (fixed): a device ioctl (X on /dev/sda)"}},
		{"a file created in a top-level directory", []Use{fsUse(5, "create", need("/tmp", "create"), need("/tmp/x", "write"))}, StatusIncomplete, []string{"# INCOMPLETE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := writeRecording(t, session(tc.uses...))
			g, err := Generate(rec, GenerateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if g.Record.Status != tc.status {
				t.Errorf("status %d, want %d; why %q", g.Record.Status, tc.status, g.Record.Why)
			}
			cfg, err := os.ReadFile(filepath.Join(rec, PolicyFile))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(cfg), "# The recorded program ran UNSANDBOXED") || !strings.Contains(string(cfg), "covers 1 session(s)") {
				t.Errorf("header does not say unsandboxed and the session count first:\n%s", cfg)
			}
			for _, r := range tc.rows {
				if !strings.Contains(string(cfg), r) {
					t.Errorf("policy lacks %q:\n%s", r, cfg)
				}
			}
			if _, err := os.Stat(filepath.Join(rec, RecordFile)); err != nil {
				t.Error(err)
			}
		})
	}
}

// A [read] row never names a path a session created: a read of a created
// file lands on the nearest directory the sessions found.
func TestGenerateReadOfCreatedFile(t *testing.T) {
	rec := writeRecording(t, session(
		fsUse(1, "create", need("/var/w", "create"), need("/var/w/sub/out.txt", "write")),
		fsUse(2, "read", need("/var/w/sub/out.txt", "read"))))
	g, err := Generate(rec, GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for q, secs := range g.Policy.FS {
		if secs["read"] && q != "/var/w" {
			t.Errorf("[read] %s, want only /var/w", q)
		}
	}
	found := false
	for _, w := range g.Record.Widenings {
		if w.Object == "/var/w/sub/out.txt" && w.Row == "[read] /var/w" && strings.Contains(w.Reason, "nearest directory that existed before") {
			found = true
		}
	}
	if !found {
		t.Errorf("record.json's widenings %+v lack the read of out.txt with its reason", g.Record.Widenings)
	}
	if g.Record.Status != StatusOK {
		t.Errorf("status %d: %q", g.Record.Status, g.Record.Why)
	}
}

func TestGenerateRefusesFailedSession(t *testing.T) {
	s := session()
	s.ScriptError = "script line 3 (expect x): timed out"
	if _, err := Generate(writeRecording(t, s), GenerateOptions{}); err == nil || !strings.Contains(err.Error(), "script line 3") {
		t.Fatalf("Generate of a failed session = %v, want an error naming its line", err)
	}
}

// The reference REPL session (testdata/repl, recorded in a guest) gives a
// policy with its UDP bind, the working directory's create and write, and
// no row under /tmp.
func TestGenerateReferenceREPL(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "repl")
	if err := copyTree("testdata/repl/recording", rec); err != nil {
		t.Fatal(err)
	}
	g, err := Generate(rec, GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Record.Status != StatusOK {
		t.Fatalf("status %d: %q", g.Record.Status, g.Record.Why)
	}
	cfg := string(g.Policy.Render())
	for _, want := range []string{"[bind]\nallow 40123 udp\n", "[create]\n/var/tmp/testing-dir\n", "[write]\n/var/tmp/testing-dir\n", "[execute]\n/usr/bin\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("policy lacks %q:\n%s", want, cfg)
		}
	}
}

// The terminal tool reference session (testdata/tool): its log in the
// working directory, readline's terminfo, and nothing INCOMPLETE.
func TestGenerateReferenceTool(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "tool")
	if err := copyTree("testdata/tool/recording", rec); err != nil {
		t.Fatal(err)
	}
	g, err := Generate(rec, GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Record.Status != StatusOK {
		t.Fatalf("status %d: %q", g.Record.Status, g.Record.Why)
	}
	cfg := string(g.Policy.Render())
	for _, want := range []string{"[create]\n/var/tmp/testing-dir\n", "/usr/lib/terminfo/x\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("policy lacks %q:\n%s", want, cfg)
		}
	}
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}
