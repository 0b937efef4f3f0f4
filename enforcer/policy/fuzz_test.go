package policy

import (
	"os"
	"testing"
)

// FuzzParse holds Parse to its invariants on any input: an error means no
// policy; a policy renders to text that parses to an equal policy; Render is
// idempotent and the hash survives the round trip.
func FuzzParse(f *testing.F) {
	for _, name := range policyFiles(f) {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	src, err := os.ReadFile("testdata/five-problems.cfg")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(src)
	for _, s := range []string{
		"", "\xef\xbb\xbf[read]\n/usr\n", "[read]\r\n/usr\n", "[read]\n/us\x00r\n",
		"# h\n\n[read]\n# c\n/usr # d\n", "[connect]\nallow [::ffff:127.0.0.1/120]\n",
		"[limits]\ntimeout=0.001\ntimeout=0\n", "[bind]\nallow 0 udp\n", "[accept]\nexpose 1 to 2 from ::1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.cfg", src)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a policy beside an error: %v", err)
			}
			if _, ok := err.(ErrorList); !ok {
				t.Fatalf("Parse error is %T, want ErrorList", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("a parsed policy does not validate: %v\n%q", err, src)
		}
		out := p.Render()
		q, err := Parse("fuzz.cfg", out)
		if err != nil {
			t.Fatalf("Parse(Render(p)): %v\ninput %q\nrendered %q", err, src, out)
		}
		if !q.Equal(p) {
			t.Fatalf("Parse(Render(p)) != p\ninput %q\nrendered %q\nreparsed %q", src, out, q.Render())
		}
		if again := q.Render(); string(again) != string(out) {
			t.Fatalf("Render not idempotent:\n%q\n%q", out, again)
		}
		if q.Hash() != p.Hash() {
			t.Fatalf("hash changed over a round trip")
		}
	})
}
