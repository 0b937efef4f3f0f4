package wide

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func mkdir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// codes lists the warnings of a one-row policy as "W001 target" strings.
func codes(t *testing.T, section policy.Section, row, home string) []string {
	t.Helper()
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{row: {section: true}}}
	var out []string
	for _, w := range Check(p, Options{Home: home}) {
		out = append(out, string(w.Code)+" "+w.Target)
		if !strings.Contains(w.String(), row) {
			t.Errorf("warning %q does not name the row %s", w, row)
		}
	}
	return out
}

// TestCheck judges real rows on this machine: links made for the test, the
// real /proc and /sys, a home made for the test.
func TestCheck(t *testing.T) {
	d := t.TempDir()
	real := mkdir(t, filepath.Join(d, "real"))
	os.WriteFile(filepath.Join(real, "f"), []byte("x"), 0o644)
	home := mkdir(t, filepath.Join(d, "users", "u"))
	mkdir(t, filepath.Join(home, ".ssh"))
	mkdir(t, filepath.Join(home, ".config", "gh"))
	mkdir(t, filepath.Join(home, "project"))
	loop := symlink(t, "loop", filepath.Join(d, "loop"))

	for _, tc := range []struct {
		Name    string
		Section policy.Section
		Row     string
		Want    []string
	}{
		{"link to /", policy.Read, symlink(t, "/", filepath.Join(d, "root")), []string{"W001 /", "W002 /"}},
		{"relative link to /", policy.Execute, symlink(t, "../../../../../../../../..", filepath.Join(d, "up")), []string{"W001 /", "W002 /"}},
		{"link out to /etc", policy.Read, symlink(t, "/etc", filepath.Join(d, "etc")), []string{"W001 /etc"}},
		{"link to /proc", policy.Read, symlink(t, "/proc", filepath.Join(d, "proc")), []string{"W001 /proc", "W003 /proc"}},
		{"link within its directory", policy.Read, symlink(t, "real", filepath.Join(d, "current")), nil},
		{"link to a file elsewhere", policy.Read, symlink(t, "/etc/hostname", filepath.Join(d, "hostname")), nil},
		{"link to a credential file", policy.Read, symlink(t, "/etc/shadow", filepath.Join(d, "shadow")), []string{"W005 /etc/shadow"}},
		{"row beneath a link to /", policy.Read, filepath.Join(d, "root", "etc"), nil},
		{"link loop", policy.Read, loop, nil},
		{"/", policy.Read, "/", []string{"W002 /"}},
		{"/proc", policy.Read, "/proc", []string{"W003 /proc"}},
		{"/sys", policy.Write, "/sys", []string{"W003 /sys"}},
		{"/proc/self", policy.Read, "/proc/self", nil},
		{"/proc/self/environ", policy.Read, "/proc/self/environ", nil},
		{"$HOME", policy.Read, home, []string{"W004 " + home}},
		{"above $HOME", policy.Read, filepath.Join(d, "users"), []string{"W004 " + filepath.Join(d, "users")}},
		{"within ~/.ssh", policy.Read, filepath.Join(home, ".ssh", "id_ed25519"), []string{"W005 " + filepath.Join(home, ".ssh", "id_ed25519")}},
		{"holds ~/.config/gh", policy.Read, filepath.Join(home, ".config"), []string{"W005 " + filepath.Join(home, ".config")}},
		{"project in $HOME", policy.Write, filepath.Join(home, "project"), nil},
		{"/etc", policy.Read, "/etc", nil},
		{"/etc/shadow", policy.Read, "/etc/shadow", []string{"W005 /etc/shadow"}},
		{"/etc/sudoers.d", policy.Write, "/etc/sudoers.d", []string{"W005 /etc/sudoers.d"}},
		{"/root", policy.Read, "/root", []string{"W005 /root"}},
		{"/usr", policy.Read, "/usr", nil},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			got := codes(t, tc.Section, tc.Row, home)
			if strings.Join(got, "\n") != strings.Join(tc.Want, "\n") {
				t.Errorf("Check([%s] %s) = %q; want %q", tc.Section, tc.Row, got, tc.Want)
			}
		})
	}
	// Without a home, rows there are judged on the system locations alone.
	if got := codes(t, policy.Read, home, ""); got != nil {
		t.Errorf("Check($HOME) without Options.Home = %q; want nothing", got)
	}
	// $HOME is root's home: W004, not W005 as well.
	if got := codes(t, policy.Read, "/root", "/root"); strings.Join(got, ",") != "W004 /root" {
		t.Errorf("Check(/root) with HOME=/root = %q; want W004 only", got)
	}
}

func TestCheckMessages(t *testing.T) {
	d := t.TempDir()
	home := mkdir(t, filepath.Join(d, "u"))
	mkdir(t, filepath.Join(home, ".aws"))
	link := symlink(t, "/", filepath.Join(d, "everything"))
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{
		link:           {policy.Read: true},
		home:           {policy.Read: true, policy.Write: true},
		"/srv":         {policy.Read: true, policy.Write: true},
		"/srv/narrow":  {policy.Read: true},
		"/proc":        {policy.Read: true},
		"/etc/gshadow": {policy.Execute: true},
	}}
	var got []string
	for _, w := range Check(p, Options{Home: home}) {
		got = append(got, w.String())
	}
	for _, want := range []string{
		"W001 " + link + " → /: [read] names a symbolic link out of " + d + " to the directory /: Landlock grants it on / and everything beneath it",
		"W002 " + link + " → /: [read] on / is the whole file system",
		"W003 /proc: [read] on /proc whole exposes every process's environ",
		"W004 " + home + ": [read][write] on $HOME (" + home + "), the invoking user's home, grants every credential kept there (~/.aws)",
		"W005 /etc/gshadow: [execute] on /etc/gshadow covers /etc/gshadow: group password hashes",
		`W006 /srv/narrow: "/srv/narrow" is granted "r" but lies beneath "/srv"`,
	} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("warnings\n%s\nlack %q", strings.Join(got, "\n"), want)
		}
	}
}

func TestResolve(t *testing.T) {
	d := t.TempDir()
	mkdir(t, filepath.Join(d, "a", "b"))
	symlink(t, "a/b", filepath.Join(d, "ab"))
	symlink(t, "../../a", filepath.Join(d, "a", "b", "up"))
	symlink(t, "ab", filepath.Join(d, "chain"))
	symlink(t, "self", filepath.Join(d, "self"))
	for _, tc := range []struct{ In, Want string }{
		{filepath.Join(d, "ab"), filepath.Join(d, "a", "b")},
		{filepath.Join(d, "chain", "up", "b"), filepath.Join(d, "a", "b")},
		{filepath.Join(d, "ab", "missing", "deeper"), filepath.Join(d, "a", "b", "missing", "deeper")},
		{"/proc/self/status", "/proc/self/status"},
		{"/proc/thread-self", "/proc/thread-self"},
		{"/", "/"},
	} {
		if got, err := Resolve(tc.In); err != nil || got != tc.Want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", tc.In, got, err, tc.Want)
		}
	}
	if _, err := Resolve(filepath.Join(d, "self")); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Errorf("Resolve(a loop) = %v; want an error naming the links", err)
	}
	if _, err := Resolve("relative"); err == nil {
		t.Error("Resolve(relative) succeeded")
	}
}

func TestLinks(t *testing.T) {
	d := t.TempDir()
	link := symlink(t, "/", filepath.Join(d, "root"))
	file := symlink(t, "/etc/hostname", filepath.Join(d, "h"))
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{link: {policy.Read: true}, file: {policy.Read: true}, "/usr": {policy.Read: true}}}
	got := strings.Join(Links(p), "\n")
	want := "link " + file + " → /etc/hostname ([read] grants that file)\nlink " + link + " → / (a directory: [read] grants everything beneath it)"
	if got != want {
		t.Errorf("Links =\n%s\nwant\n%s", got, want)
	}
}

// TestCodesDocumented keeps docs/policy.md's warning table equal to Codes,
// and the codes unique and in order.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), Table()) {
		t.Errorf("docs/policy.md lacks the warning table as Codes renders it:\n%s", Table())
	}
	for i, c := range Codes {
		if want := Code("W00" + string(rune('1'+i))); c.Code != want {
			t.Errorf("Codes[%d] = %s; want %s (codes are never renumbered: append)", i, c.Code, want)
		}
	}
}

// TestMagicLinks judges rows that are, or resolve through, a /proc magic
// link: each is W007 naming the link, a refused code; the /proc/self rows
// that name the command's own entries are not.
func TestMagicLinks(t *testing.T) {
	d := t.TempDir()
	self := symlink(t, "/proc/self", filepath.Join(d, "me"))
	stdin := symlink(t, "/proc/self/fd/0", filepath.Join(d, "stdin"))
	for _, tc := range []struct{ Row, Link string }{
		{"/proc/self/root", "/proc/self/root"},
		{"/proc/self/root/etc", "/proc/self/root"},
		{"/proc/self/cwd", "/proc/self/cwd"},
		{"/proc/self/exe", "/proc/self/exe"},
		{"/proc/self/fd/3", "/proc/self/fd/3"},
		{"/proc/self/map_files/400000-401000", "/proc/self/map_files/400000-401000"},
		{"/proc/self/ns/mnt", "/proc/self/ns/mnt"},
		{"/proc/thread-self/root", "/proc/thread-self/root"},
		{"/proc/self/task/1/cwd", "/proc/self/task/1/cwd"},
		{"/proc/1/root", "/proc/1/root"},
		{"/proc/1/task/1/fd/0", "/proc/1/task/1/fd/0"},
		{"/proc/999999999/root", "/proc/999999999/root"},
		{filepath.Join(self, "root"), "/proc/self/root"},
		{filepath.Join(self, "root", "etc", "shadow"), "/proc/self/root"},
		{stdin, "/proc/self/fd/0"},
		{"/dev/stdin", "/proc/self/fd/0"},
	} {
		t.Run(tc.Row, func(t *testing.T) {
			got := codes(t, policy.Read, tc.Row, "")
			if want := "W007 " + tc.Link; strings.Join(got, ",") != want {
				t.Errorf("Check([read] %s) = %q; want %q", tc.Row, got, want)
			}
			if _, err := Resolve(tc.Row); !IsMagicLink(err) {
				t.Errorf("Resolve(%s) = %v; want a *MagicLinkError", tc.Row, err)
			}
		})
	}
	for _, row := range []string{"/proc/self", "/proc/self/cgroup", "/proc/self/fd", "/proc/self/ns", "/proc/self/task", "/proc/thread-self/stat", filepath.Join(self, "status")} {
		if got := codes(t, policy.Read, row, ""); got != nil {
			t.Errorf("Check([read] %s) = %q; want nothing", row, got)
		}
	}
	if !CodeMagicLink.Refused() || CodeSymlink.Refused() {
		t.Error("W007 is not the refused code, or W001 is")
	}
}
