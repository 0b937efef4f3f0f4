package enforcer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/landlock"

	"golang.org/x/sys/unix"
)

func TestCommandEnv(t *testing.T) {
	caller := []string{"PATH=/usr/bin", "HOME=/root", "GITHUB_TOKEN=ghp_x", "SSH_AUTH_SOCK=/run/agent",
		"AWS_SECRET_ACCESS_KEY=k", "LD_PRELOAD=/tmp/evil.so", "LC_ALL=C", "TERM=xterm", RoleEnv + "=" + ChildRole, "KEEP=me", "EMPTY="}
	for _, tc := range []struct {
		name  string
		rules []EnvRule
		want  []string
	}{
		{"default", nil, []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm"}},
		{"pass one", []EnvRule{{Name: "KEEP"}}, []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm", "KEEP=me"}},
		{"preload only when asked", []EnvRule{{Name: "LD_PRELOAD"}}, []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm", "LD_PRELOAD=/tmp/evil.so"}},
		{"set overrides in place", []EnvRule{{Name: "HOME", Value: "/work", Set: true}, {Name: "NEW", Value: "a=b c", Set: true}},
			[]string{"PATH=/usr/bin", "HOME=/work", "LC_ALL=C", "TERM=xterm", "NEW=a=b c"}},
		{"later wins", []EnvRule{{Name: "X", Value: "1", Set: true}, {Name: "X", Value: "2", Set: true}},
			[]string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm", "X=2"}},
		{"unset name passes nothing, empty passes", []EnvRule{{Name: "NOT_SET"}, {Name: "EMPTY"}}, []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm", "EMPTY="}},
		{"role never", []EnvRule{{Name: RoleEnv}, {Name: RoleEnv, Value: ReaperRole, Set: true}}, []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CommandEnv(caller, tc.rules)
			if !slices.Equal(got, tc.want) {
				t.Errorf("CommandEnv = %q, want %q", got, tc.want)
			}
		})
	}
	dropped := DroppedEnv(caller, CommandEnv(caller, nil))
	if want := []string{"GITHUB_TOKEN", "SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY", "LD_PRELOAD", "KEEP", "EMPTY"}; !slices.Equal(dropped, want) {
		t.Errorf("DroppedEnv = %q, want %q", dropped, want)
	}
}

func TestParseEnvRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want EnvRule
		err  string
	}{
		{"PATH", EnvRule{Name: "PATH"}, ""},
		{"A=", EnvRule{Name: "A", Set: true}, ""},
		{"_x1=a=b", EnvRule{Name: "_x1", Value: "a=b", Set: true}, ""},
		{"", EnvRule{}, "want NAME"},
		{"=v", EnvRule{}, "want NAME"},
		{"1A=v", EnvRule{}, "want NAME"},
		{"A B=v", EnvRule{}, "want NAME"},
		{"export A=v", EnvRule{}, "want NAME"},
		{"A=x\x00y", EnvRule{}, "NUL"},
	} {
		got, err := ParseEnvRule(tc.in)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) || got != tc.want {
			t.Errorf("ParseEnvRule(%q) = %+v, %v; want %+v, error with %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseEnvFile(t *testing.T) {
	rules, err := ParseEnvFile("e.env", []byte("# tokens for the tests\n\nTOKEN\nURL=https://x/?a=b\n"))
	want := []EnvRule{{Name: "TOKEN"}, {Name: "URL", Value: "https://x/?a=b", Set: true}}
	if err != nil || !slices.Equal(rules, want) {
		t.Errorf("ParseEnvFile = %+v, %v; want %+v", rules, err, want)
	}
	_, err = ParseEnvFile("e.env", []byte("OK=1\nbad name=1\nCRLF=1\r\n 'A'=2\n"))
	if err == nil {
		t.Fatal("ParseEnvFile accepted bad lines")
	}
	for _, line := range []string{"e.env:2:", "e.env:3: the line ends with a carriage return", "e.env:4:"} {
		if !strings.Contains(err.Error(), line) {
			t.Errorf("ParseEnvFile error %q lacks %q", err, line)
		}
	}
}

// TestReadEnvFile: a regular file is read; a FIFO (which would block an
// open or a read), a directory and a device are refused at once, naming the
// kind; a file over the limit is refused.
func TestReadEnvFile(t *testing.T) {
	d := t.TempDir()
	ok := filepath.Join(d, "ok.env")
	os.WriteFile(ok, []byte("A=1\n"), 0o644)
	if rules, err := ReadEnvFile(ok); err != nil || len(rules) != 1 {
		t.Errorf("ReadEnvFile(regular) = %v, %v", rules, err)
	}
	fifo := filepath.Join(d, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(d, "big.env")
	os.WriteFile(big, []byte(strings.Repeat("A=1\n", maxEnvFile/4+1)), 0o644)
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file"}, {d, "not a regular file"}, {"/dev/zero", "not a regular file"},
		{big, "larger than"}, {filepath.Join(d, "missing"), "no such file"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadEnvFile(tc.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadEnvFile(%s) = %v, want an error with %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadEnvFile(%s) blocked", tc.path)
		}
	}
}

// FuzzParseEnvFile: any input parses or fails without panicking; every rule
// has a valid name and no NUL, and what parsed parses again to the same
// rules when written back one per line.
func FuzzParseEnvFile(f *testing.F) {
	f.Add([]byte("# c\nA\nB=1\n\nC==x y\n"))
	f.Add([]byte("bad name=1\r\n\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseEnvFile("f", data)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, r := range rules {
			if !validEnvName(r.Name) || strings.IndexByte(r.Value, 0) >= 0 {
				t.Fatalf("rule %+v from %q", r, data)
			}
			b.WriteString(r.String() + "\n")
		}
		again, err := ParseEnvFile("f", []byte(b.String()))
		if err != nil || !slices.Equal(again, rules) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", data, again, err, rules)
		}
	})
}

// TestRunDocSaysSafeEnvAndGaps: docs/run.md lists the safe set and every
// gap with the ABI that closes it, as the code has them.
func TestRunDocSaysSafeEnvAndGaps(t *testing.T) {
	data, err := os.ReadFile("../docs/run.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	if line := "\n" + strings.Join(SafeEnv, " ") + " LC_*\n"; !strings.Contains(doc, line) {
		t.Errorf("docs/run.md lacks the safe set line %q", strings.TrimSpace(line))
	}
	for _, g := range landlock.Gaps {
		i := strings.Index(doc, "| `"+g.Name+"` |")
		if i < 0 {
			t.Errorf("docs/run.md has no table row for gap %s", g.Name)
			continue
		}
		row, _, _ := strings.Cut(doc[i:], "\n")
		if !strings.Contains(row, fmt.Sprintf("| ABI %d", g.Since())) {
			t.Errorf("docs/run.md row %q does not say ABI %d", row, g.Since())
		}
	}
}
