package shellquote

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// nasty are the words a quoter gets wrong: blanks, quotes, newlines,
// expansions, globs, the empty word, bytes that are not UTF-8.
var nasty = []string{
	"", " ", "a b", "\t", "it's", "'", "''", `"`, `a"b'c`, "line\nbreak", "\n",
	"$HOME", "${x:-y}", "$(id)", "`id`", "*", "?", "[ab]", "~", "~root", "a;b", "a&b", "a|b",
	"<", ">", "(x)", "{a,b}", "#c", "!", "^", `\`, `\n`, "=cmd", "-n", "--", "%", "\xff\xfe", "é", "\x01\x7f",
	"CC=gcc", "console=ttyS0 quiet", "/usr/bin/qemu-system-x86_64", "a=b=c",
}

// printf runs `<shell> -c 'printf %s\0 ' + line` and returns the words the
// shell read.
func printf(t testing.TB, shell, line string) []string {
	t.Helper()
	out, err := exec.Command(shell, "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("%s -c on %q: %v", shell, line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

func shells(t testing.TB) []string {
	var have []string
	for _, sh := range []string{"sh", "bash", "zsh"} {
		if _, err := exec.LookPath(sh); err == nil {
			have = append(have, sh)
		}
	}
	if len(have) == 0 {
		t.Fatal("no sh on PATH")
	}
	return have
}

func TestQuoteRoundTrips(t *testing.T) {
	for _, sh := range shells(t) {
		for _, s := range nasty {
			if got := printf(t, sh, quote(s)); len(got) != 1 || got[0] != s {
				t.Errorf("%s read quote(%q) = %s back as %q", sh, s, quote(s), got)
			}
		}
		if got := printf(t, sh, Join(nasty)); strings.Join(got, "\x00") != strings.Join(nasty, "\x00") {
			t.Errorf("%s read Join(nasty) back as %q", sh, got)
		}
	}
}

func TestQuoteForms(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "''",
		"plain-word_1.2/x":  "plain-word_1.2/x",
		"CC=gcc":            "CC=gcc",
		"=cmd":              "'=cmd'",
		"it's":              `'it'\''s'`,
		"console=ttyS0 a=b": "'console=ttyS0 a=b'",
		"a\nb":              "'a\nb'",
		"~":                 "'~'",
		"\xff":              "'\xff'",
		"user@host:1,2+3%4": "user@host:1,2+3%4",
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Join([]string{"qemu", "-append", "console=ttyS0 quiet", "it's", ""}); got != `qemu -append 'console=ttyS0 quiet' 'it'\''s' ''` {
		t.Errorf("Join = %s", got)
	}
}

// FuzzQuote: for any bytes but NUL, sh reads quote's word back unchanged,
// alone and beside a second word.
func FuzzQuote(f *testing.F) {
	for _, s := range nasty {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.IndexByte(a, 0) >= 0 || strings.IndexByte(b, 0) >= 0 {
			t.Skip("no shell word holds NUL")
		}
		out, err := exec.Command("sh", "-c", `printf '%s\0' `+Join([]string{a, b})).Output()
		if err != nil {
			t.Fatalf("sh -c on Join(%q, %q) = %s: %v", a, b, Join([]string{a, b}), err)
		}
		if want := a + "\x00" + b + "\x00"; !bytes.Equal(out, []byte(want)) {
			t.Errorf("sh read Join(%q, %q) = %s back as %q", a, b, Join([]string{a, b}), out)
		}
	})
}
