package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("t.cfg", []byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return p
}

func TestHashExcludesComments(t *testing.T) {
	a := mustParse(t, "# header A\n[read]\n# why\n/usr\n/etc\n[connect]\n# loop\nallow localhost\nallow 127.0.0.1:*\n")
	b := mustParse(t, "[connect]\nallow 127.0.0.1:*\nallow localhost:*\n[read]\n/etc\n/usr # other words\n")
	if a.Hash() != b.Hash() {
		t.Fatalf("Hash differs for policies granting the same: %s, %s", a.Hash(), b.Hash())
	}
	c := mustParse(t, "[read]\n/usr\n")
	if a.Hash() == c.Hash() {
		t.Fatal("Hash equal for policies granting different things")
	}
	if !strings.HasPrefix(a.Hash(), "sha256:") || len(a.Hash()) != len("sha256:")+64 {
		t.Fatalf("Hash = %q; want sha256:<64 hex>", a.Hash())
	}
	if got, want := FileSHA256([]byte("abc")), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("FileSHA256(abc) = %s, want %s", got, want)
	}
	// The hash of an empty policy is the SHA-256 of no bytes.
	if got, want := (&Policy{}).Hash(), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Fatalf("empty Hash = %s, want %s", got, want)
	}
}

func TestUnionIntersect(t *testing.T) {
	a := mustParse(t, "[read]\n/a\n/both\n[write]\n/both\n[connect]\nallow localhost\n[bind]\nallow 0\n[limits]\ntimeout=10\ncpu=0\nnproc=5\n")
	b := mustParse(t, "[read]\n/b\n/both\n[connect]\nallow localhost\nallow 127.0.0.1:5432\n[limits]\ntimeout=20\ncpu=30\nnofile=9\n")
	u := Union(a, nil, b)
	want := "[read]\n/a\n/b\n/both\n\n[write]\n/both\n\n[connect]\nallow 127.0.0.1:5432\nallow localhost:*\n\n[bind]\nallow 0\n\n[limits]\ntimeout=20\ncpu=0\nnproc=5\nnofile=9\n"
	if got := string(u.Render()); got != want {
		t.Errorf("Union =\n%s\nwant\n%s", got, want)
	}
	if !Union(b, a).Equal(u) {
		t.Error("Union is not commutative in what it grants")
	}
	i := Intersect(a, b)
	want = "[read]\n/both\n\n[connect]\nallow localhost:*\n\n[limits]\ntimeout=10\ncpu=30\n"
	if got := string(i.Render()); got != want {
		t.Errorf("Intersect =\n%s\nwant\n%s", got, want)
	}
	if len(Union().FS) != 0 {
		t.Error("Union() grants something")
	}
}

func TestRemainder(t *testing.T) {
	base := mustParse(t, "[read]\n/usr\n[restructure]\n/srv\n[connect]\nallow localhost\n")
	ex := mustParse(t, "[read]\n/usr/lib\n/etc\n[execute]\n/usr/bin/x\n[create]\n/srv/a\n[write]\n/srv/a\n[connect]\nallow localhost:*\nallow 127.0.0.1:80\n[limits]\ntimeout=90\n")
	got := string(Remainder(ex, base).Render())
	want := "[read]\n/etc\n\n[execute]\n/usr/bin/x\n\n[write]\n/srv/a\n\n[connect]\nallow 127.0.0.1:80\n\n[limits]\ntimeout=90\n"
	if got != want {
		t.Fatalf("Remainder =\n%s\nwant\n%s", got, want)
	}
	// The orchestrator's case: an exercise inside its base leaves only limits.
	ex2 := mustParse(t, "[read]\n/usr\n[limits]\ntimeout=90\n")
	if got := string(Remainder(ex2, Union(ex2)).Render()); got != "[limits]\ntimeout=90\n" {
		t.Fatalf("Remainder(ex, union) = %q", got)
	}
}

func TestNormaliseHierarchy(t *testing.T) {
	p := mustParse(t, "[read]\n/srv\n/srv/a\n/srv/b\n/srv/a/deep\n/opt/x\n[write]\n/srv\n/srv/b\n[execute]\n/srv/c\n")
	n := p.StrictSubsets()
	if len(n) != 2 || n[0].Path != "/srv/a" || n[1].Path != "/srv/a/deep" {
		t.Fatalf("StrictSubsets = %v; want /srv/a and /srv/a/deep beneath /srv", n)
	}
	if !strings.Contains(n[0].String(), `"/srv/a" is granted "r" but lies beneath "/srv", which is granted the wider "rw"`) {
		t.Errorf("Nesting.String = %s", n[0])
	}
	q, err := p.NormaliseHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	want := "[read]\n/opt/x\n/srv\n/srv/a\n/srv/a/deep\n/srv/b\n\n[execute]\n/srv/c\n\n[write]\n/srv\n/srv/a\n/srv/a/deep\n/srv/b\n"
	if got := string(q.Render()); got != want {
		t.Fatalf("NormaliseHierarchy =\n%s\nwant\n%s", got, want)
	}
	if len(q.StrictSubsets()) != 0 {
		t.Fatalf("normalised policy still nests strict subsets: %v", q.StrictSubsets())
	}
	if len(p.FS["/srv/a"]) != 1 {
		t.Fatal("NormaliseHierarchy changed its receiver")
	}
	// [create] beneath [restructure] (m ⊂ mdf) is raised; root counts as an ancestor.
	r := mustParse(t, "[restructure]\n/\n[create]\n/tmp\n")
	if got := r.StrictSubsets(); len(got) != 1 || got[0].Ancestor != "/" {
		t.Fatalf("StrictSubsets = %v", got)
	}
	bad := &Policy{FS: map[string]map[Section]bool{"rel": {Read: true}}}
	if _, err := bad.NormaliseHierarchy(); err == nil {
		t.Fatal("NormaliseHierarchy accepted a relative path")
	}
}

func TestLetters(t *testing.T) {
	all := map[Section]bool{}
	for _, s := range FilesystemSections {
		all[s] = true
	}
	if got := Letters(all); got != "rwxmplfdi" {
		t.Fatalf("Letters(all) = %q", got)
	}
	if got := Letters(map[Section]bool{Restructure: true}); got != "mfd" {
		t.Fatalf("Letters(restructure) = %q", got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		Name string
		P    *Policy
		Want string
	}{
		{"relative", &Policy{FS: map[string]map[Section]bool{"x": {Read: true}}}, "not absolute"},
		{"bad section", &Policy{FS: map[string]map[Section]bool{"/x": {Connect: true}}}, "not a filesystem section"},
		{"remote wildcard", &Policy{Connect: []ConnectRule{{Host: "example.org", Transport: TCP}}}, "names no port"},
		{"uncanonical host", &Policy{Connect: []ConnectRule{{Host: "Example.org", Port: 1, Transport: TCP}}}, "not canonical"},
		{"transport", &Policy{Bind: []BindRule{{Port: 1, Transport: "sctp"}}}, "[bind]"},
		{"port", &Policy{Bind: []BindRule{{Port: 70000, Transport: TCP}}}, "[bind]"},
		{"limit", &Policy{Limits: map[LimitKey]Limit{MemMB: {Value: MaxMB + 1}}}, "[limits]"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			if err := tc.P.Validate(); err == nil || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("Validate = %v; want %q", err, tc.Want)
			}
		})
	}
	for _, f := range policyFiles(t) {
		p, err := ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%s) = %v", f, err)
		}
	}
}

func TestDiff(t *testing.T) {
	a := mustParse(t, "[read]\n/a\n[bind]\nallow 0\n[limits]\ntimeout=5\n")
	b := mustParse(t, "[read]\n/a\n/b\n[limits]\ntimeout=6\n")
	got := Diff(a, b)
	want := []string{"- [bind] allow 0", "- [limits] timeout=5", "+ [read] /b", "+ [limits] timeout=6"}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff = %q, want %q", got, want)
	}
	if d := Diff(a, a.Clone()); len(d) != 0 {
		t.Fatalf("Diff(a, a) = %q", d)
	}
}

func TestMissingPaths(t *testing.T) {
	dir := t.TempDir()
	there := filepath.Join(dir, "there")
	if err := os.WriteFile(there, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone")
	p := mustParse(t, fmt.Sprintf("[read]\n%s\n%s\n[execute]\n%s\n[write]\n%s/w\n", there, gone, gone, dir))
	if got := p.MissingPaths(); !slices.Equal(got, []string{gone}) {
		t.Fatalf("MissingPaths() = %q, want [%s]", got, gone)
	}
	if got := p.MissingPaths(Write); !slices.Equal(got, []string{dir + "/w"}) {
		t.Fatalf("MissingPaths(write) = %q", got)
	}
}

// rows builds a realistic policy of n rows across every section.
func rows(n int) []byte {
	var b strings.Builder
	b.WriteString("# generated: a policy of many rows\n")
	per := n / 11
	for _, s := range FilesystemSections {
		b.WriteString("[" + string(s) + "]\n")
		for i := 0; i < per; i++ {
			fmt.Fprintf(&b, "/usr/lib/x86_64-linux-gnu/%s/lib%04d.so.%d # row %d\n", s, i, i%7, i)
		}
	}
	b.WriteString("[connect]\n")
	for i := 0; i < per; i++ {
		fmt.Fprintf(&b, "allow 10.%d.%d.1:%d\n", i/250, i%250, 1+i)
	}
	b.WriteString("[bind]\n")
	for i := 0; i < per; i++ {
		fmt.Fprintf(&b, "allow %d udp\n", 1024+i)
	}
	b.WriteString("[limits]\ntimeout=90\ncpu=120\n")
	return []byte(b.String())
}

func BenchmarkParseRender(b *testing.B) {
	src := rows(2000)
	p, err := Parse("bench.cfg", src)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, secs := range p.FS {
		n += len(secs)
	}
	n += len(p.Connect) + len(p.Bind) + len(p.Limits)
	if n < 1900 {
		b.Fatalf("benchmark policy has %d rows; want about 2000", n)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for b.Loop() {
		p, err := Parse("bench.cfg", src)
		if err != nil {
			b.Fatal(err)
		}
		_ = p.Render()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestWithinAndBeneath: component-wise, "/" holds everything, and Within
// also holds the directory itself.
func TestWithinAndBeneath(t *testing.T) {
	tests := []struct {
		p, dir          string
		within, beneath bool
	}{
		{"/a", "/a", true, false},
		{"/a/b", "/a", true, true},
		{"/ab", "/a", false, false},
		{"/a", "/a/b", false, false},
		{"/x", "/", true, true},
		{"/", "/", true, false},
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.dir); got != tt.within {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.within)
		}
		if got := Beneath(tt.p, tt.dir); got != tt.beneath {
			t.Errorf("Beneath(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.beneath)
		}
	}
}
