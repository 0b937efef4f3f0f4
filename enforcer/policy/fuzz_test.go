package policy

import (
	"math"
	"os"
	"testing"
	"time"
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
		for k, l := range p.Limits {
			checkLimitFits(t, k, l, string(src))
		}
	})
}

// FuzzParseLimit holds every [limits] value that parses to a range in which
// nothing computed from it overflows: timeout and cpu as a time.Duration of
// at most MaxSeconds, mem_mb and fsize_mb in bytes as an int64.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"0", "90", "1.500", "0.000", "18446744074", "9223372037", "9223372036.854",
		"1000000000", "1000000000.000", "1000000000.001", "999999999999999.999", "8796093022207", "922337203685477580"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, val string) {
		for _, k := range LimitKeys {
			l, err := ParseLimit(k, val)
			if err != nil {
				continue
			}
			checkLimitFits(t, k, l, val)
		}
	})
}

// checkLimitFits fails t when a parsed limit can overflow what is computed
// from it.
func checkLimitFits(t *testing.T, k LimitKey, l Limit, src string) {
	t.Helper()
	if l.Value < 0 || l.Off && l.Value != 0 {
		t.Fatalf("%s from %q = %+v: negative, or off with a value", k, src, l)
	}
	switch k {
	case Timeout, CPU:
		d, err := l.Duration(k)
		if err != nil || d < 0 || d > MaxSeconds*time.Second {
			t.Fatalf("%s from %q = %+v: Duration %v, %v; want 0..%d s", k, src, l, d, err, MaxSeconds)
		}
		if unit := map[LimitKey]int64{Timeout: int64(time.Millisecond), CPU: int64(time.Second)}[k]; int64(d)/unit != l.Value {
			t.Fatalf("%s from %q = %+v: Duration %v does not give the value back", k, src, l, d)
		}
	case MemMB, FsizeMB:
		if l.Value > math.MaxInt64>>20 {
			t.Fatalf("%s from %q = %d MiB: bytes overflow an int64", k, src, l.Value)
		}
	}
}
