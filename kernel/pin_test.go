package kernel

import (
	"errors"
	"strings"
	"testing"
)

func TestEmbeddedPins(t *testing.T) {
	p, err := Lookup("7.2.13")
	if err != nil {
		t.Fatal(err)
	}
	want := Pin{
		Version: "7.2.13", ABI: 10, Source: SourceDebian,
		Package: "linux-source-7.2", PackageVersion: "7.2.13-1", Suite: "sid",
		SHA256:      "30a8c5fc63f9028a62e6d7b3f7f43bee67425dbce2a05fceba83f9b87c92083d",
		Inner:       "usr/src/linux-source-7.2.tar.xz",
		InnerSHA256: "ecb3877b9988c936dcc64c63af8a54c2fa6df7f717d4e5ee429d0f4c4859e68b",
	}
	got := p
	got.File, got.Line, got.Row = "", 0, ""
	if got != want {
		t.Errorf("Lookup(7.2.13) = %+v, want %+v", got, want)
	}
	if p.Line == 0 || p.File != PinsFile || !strings.HasPrefix(p.Row, "7.2.13 abi=10 ") {
		t.Errorf("Lookup(7.2.13) position/row = %s:%d %q", p.File, p.Line, p.Row)
	}
	old, err := Lookup("7.2.9")
	if err != nil {
		t.Fatal(err)
	}
	if old.Source != SourceURL || old.ABI != 10 || old.SHA256 != "b4c5dfbe51a364a6c7f03869200f88c8e1f77403539005f14b7fc6bc91b8d8ba" ||
		!strings.HasPrefix(old.URL, "https://cdn.kernel.org/") {
		t.Errorf("Lookup(7.2.9) = %+v", old)
	}
	if d, _ := Lookup(""); d.Version != DefaultPin {
		t.Errorf("Lookup(\"\") = %s, want DefaultPin %s", d.Version, DefaultPin)
	}
	if _, err := Lookup("6.1"); !errors.Is(err, ErrUnknownPin) || !strings.Contains(err.Error(), "7.2.13, 7.2.9") {
		t.Errorf("Lookup(6.1) = %v, want ErrUnknownPin listing the pins", err)
	}
}

func TestParsePinsErrors(t *testing.T) {
	const good = "7.2.9 abi=10 source=url url=https://example.invalid/linux-7.2.9.tar.xz sha256=b4c5dfbe51a364a6c7f03869200f88c8e1f77403539005f14b7fc6bc91b8d8ba"
	const sha = "30a8c5fc63f9028a62e6d7b3f7f43bee67425dbce2a05fceba83f9b87c92083d"
	tests := []struct {
		Name string
		Src  string
		Want []string // substrings, one per expected error, in order; each with its "pins.txt:N:" prefix
	}{
		{"BadVersion", "# c\n\nseven abi=10 source=url url=https://x.invalid/a.tar.xz sha256=" + sha,
			[]string{`pins.txt:3: version "seven"`}},
		{"UnknownSource", good + "\n7.3 abi=10 source=git url=x sha256=" + sha,
			[]string{`pins.txt:2: source="git"`}},
		{"MissingAndUnknownKeys", "7.3 abi=10 source=debian package=linux-source-7.3 colour=red sha256=" + sha,
			[]string{"pins.txt:1: source=debian pin lacks version, suite, inner, inner-sha256", "pins.txt:1: unknown keys colour"}},
		{"ShortHash", "7.3 abi=10 source=url url=https://x.invalid/a.tar.xz sha256=abc",
			[]string{`pins.txt:1: sha256="abc", want 64 lower-case hex digits`}},
		{"UpperHash", "7.3 abi=10 source=url url=https://x.invalid/a.tar.xz sha256=" + strings.ToUpper(sha),
			[]string{"pins.txt:1: sha256="}},
		{"BadABI", "7.3 abi=ten source=url url=https://x.invalid/a.tar.xz sha256=" + sha,
			[]string{`pins.txt:1: abi="ten"`}},
		{"BadURL", "7.3 abi=10 source=url url=ftp://x.invalid/a.tar.xz sha256=" + sha,
			[]string{`pins.txt:1: url="ftp://x.invalid/a.tar.xz"`}},
		{"NotKeyValue", "7.3 abi=10 source=url url=https://x.invalid/a.tar.xz sha256=" + sha + " stray",
			[]string{`pins.txt:1: field "stray" is not key=value`}},
		{"DuplicateKey", "7.3 abi=10 abi=11 source=url url=https://x.invalid/a.tar.xz sha256=" + sha,
			[]string{"pins.txt:1: key abi given twice"}},
		{"DuplicatePin", good + "\n\n" + good,
			[]string{"pins.txt:3: pin 7.2.9 already defined on line 1"}},
		{"InnerEscapes", "7.3 abi=10 source=debian package=p version=1 suite=sid sha256=" + sha + " inner=../x.tar inner-sha256=" + sha,
			[]string{`pins.txt:1: inner="../x.tar"`}},
		{"Empty", "# only comments\n", []string{"pins.txt:1: no pins defined"}},
		{"EveryBadRowReported", "x source=url\n" + good + "\ny source=url",
			[]string{"pins.txt:1:", "pins.txt:1:", "pins.txt:3:", "pins.txt:3:"}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			pins, err := ParsePins("pins.txt", []byte(tt.Src))
			if err == nil {
				t.Fatalf("ParsePins(%q) = %d pins, nil; want errors %q", tt.Src, len(pins), tt.Want)
			}
			if pins != nil {
				t.Errorf("ParsePins(%q) returned pins with an error", tt.Src)
			}
			var list PinErrors
			if !errors.As(err, &list) {
				t.Fatalf("ParsePins error %T, want PinErrors", err)
			}
			if len(list) != len(tt.Want) {
				t.Fatalf("ParsePins(%q) = %d errors:\n%v\nwant %d: %q", tt.Src, len(list), err, len(tt.Want), tt.Want)
			}
			for i, w := range tt.Want {
				if !strings.Contains(list[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, list[i].Error(), w)
				}
			}
		})
	}
}

func TestParsePinsGood(t *testing.T) {
	src := "# pins\n\n  7.3.1   abi=11 source=url    url=file:///srv/linux-7.3.1.tar.gz sha256=" + strings.Repeat("a", 64) + "  # not a comment mid-row\n"
	// A trailing "# …" mid-row is not a comment: the row is refused.
	if _, err := ParsePins("p", []byte(src)); err == nil {
		t.Fatal("ParsePins accepted a row with trailing text")
	}
	src = "# pins\n\n  7.3.1   abi=11 source=url    url=file:///srv/linux-7.3.1.tar.gz sha256=" + strings.Repeat("a", 64) + "\n"
	pins, err := ParsePins("p", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 1 || pins[0].Line != 3 || pins[0].ABI != 11 || pins[0].URL != "file:///srv/linux-7.3.1.tar.gz" {
		t.Errorf("ParsePins = %+v", pins)
	}
	if want := "7.3.1 abi=11 source=url url=file:///srv/linux-7.3.1.tar.gz sha256=" + strings.Repeat("a", 64); pins[0].Row != want {
		t.Errorf("Row = %q, want whitespace-normalised %q", pins[0].Row, want)
	}
}

func FuzzParsePins(f *testing.F) {
	f.Add(pinsTxt)
	f.Add([]byte("7.3 abi=10 source=url url=https://x.invalid/a.tar.xz sha256=" + strings.Repeat("0", 64)))
	f.Add([]byte("x source=debian\n\n# c\n7 abi= =\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		pins, err := ParsePins("f", src)
		if err != nil {
			if pins != nil {
				t.Fatalf("error %v with %d pins", err, len(pins))
			}
			return
		}
		// Every parsed row parses again to the same pin.
		for _, p := range pins {
			again, err := ParsePins("f", []byte(p.Row))
			if err != nil || len(again) != 1 {
				t.Fatalf("row %q does not re-parse: %v", p.Row, err)
			}
			a := again[0]
			a.Line, p.Line = 0, 0
			if a != p {
				t.Fatalf("re-parse of %q = %+v, want %+v", p.Row, a, p)
			}
			if !sha256RE.MatchString(p.SHA256) || p.ABI < 1 {
				t.Fatalf("accepted pin %+v", p)
			}
		}
	})
}
