package images

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func readStatus(t testing.TB) []byte {
	t.Helper()
	f, err := os.Open("testdata/dpkg-status.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRecipe(t *testing.T) {
	good := "# c\nsuite bookworm\nsed=4.9-1+deb12u1 # trailing\n\nbash=5.2.15-2+b13\ndiffutils=1:3.8-4\n"
	r, err := ParseRecipe("generic", "p.txt", []byte(good))
	if err != nil {
		t.Fatalf("ParseRecipe(good) = %v", err)
	}
	if got, want := string(r.Render()), "suite bookworm\nbash=5.2.15-2+b13\ndiffutils=1:3.8-4\nsed=4.9-1+deb12u1\n"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	r2, err := ParseRecipe("generic", "p.txt", r.Render())
	if err != nil || r2.Key() != r.Key() {
		t.Errorf("ParseRecipe(Render(r)) = %v, key %s, want the same key %s", err, r2.Key(), r.Key())
	}
	if other, _ := ParseRecipe("generic", "p.txt", []byte("suite bookworm\nbash=5.2.15-2+b14\ndiffutils=1:3.8-4\nsed=4.9-1+deb12u1\n")); other.Key() == r.Key() {
		t.Error("a changed version kept the recipe key")
	}
	if other, _ := ParseRecipe("prune", "p.txt", r.Render()); other.Key() == r.Key() {
		t.Error("another name kept the recipe key")
	}

	bad := "suite bookworm\nsuite trixie\nBash=1\nbash=x1\nbash=1.0\nbash=1.1\nnot a line\nok=1\r\n"
	_, err = ParseRecipe("generic", "p.txt", []byte(bad))
	var el ErrorList
	if !errors.As(err, &el) {
		t.Fatalf("ParseRecipe(bad) = %v, want an ErrorList", err)
	}
	want := []string{
		"p.txt:2: second suite statement; the first is on line 1",
		`p.txt:3: package name "Bash" is not a Debian package name`,
		`p.txt:4: version "x1" of bash is not a Debian version`,
		"p.txt:6: package bash listed twice (also on line 5)",
		`p.txt:7: "not a line" is neither`,
		"p.txt:8: carriage return",
	}
	if len(el) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(el), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(el[i].Error(), w) {
			t.Errorf("problem %d = %q, want prefix %q", i, el[i].Error(), w)
		}
	}
	if _, err := ParseRecipe("generic", "p.txt", []byte("# nothing\n")); err == nil || !strings.Contains(err.Error(), "no `suite") || !strings.Contains(err.Error(), "no packages") {
		t.Errorf("ParseRecipe(empty) = %v, want both the missing suite and the missing packages", err)
	}
}

// TestEmbeddedRecipes parses every recipe shipped in the binary.
func TestEmbeddedRecipes(t *testing.T) {
	names := Names()
	if len(names) == 0 || names[0] != "generic" {
		t.Fatalf("Names() = %v, want generic first", names)
	}
	for _, n := range names {
		r, err := LoadRecipe(n)
		if err != nil {
			t.Errorf("LoadRecipe(%s): %v", n, err)
			continue
		}
		if r.Suite != "bookworm" {
			t.Errorf("recipe %s: suite %s, want bookworm", n, r.Suite)
		}
	}
	if _, err := LoadRecipe("nope"); !errors.Is(err, ErrNoRecipe) {
		t.Errorf("LoadRecipe(nope) = %v, want ErrNoRecipe", err)
	}
	if _, err := LoadRecipe("../generic"); !errors.Is(err, ErrNoRecipe) {
		t.Errorf("LoadRecipe(../generic) = %v, want ErrNoRecipe", err)
	}
}

// TestGenericRecipeIsAClosure checks the committed list against the real
// status file of a generic image: every wanted tool is listed, and the list
// is exactly the set of packages that image holds.
func TestGenericRecipeIsAClosure(t *testing.T) {
	r, err := LoadRecipe("generic")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range r.Packages {
		listed[p.Name] = true
	}
	for _, w := range []string{"bash", "coreutils", "findutils", "grep", "sed", "gawk", "diffutils", "make", "strace", "python3"} {
		if !listed[w] {
			t.Errorf("images/generic/packages.txt does not list %s", w)
		}
	}
	m, err := ParseDpkgStatus(readStatus(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Diff(r, false); len(d) > 0 {
		t.Errorf("images/generic/packages.txt differs from testdata/dpkg-status.gz (recapture it after a relock): %s", strings.Join(d, "; "))
	}
}

func TestParseDpkgStatus(t *testing.T) {
	m, err := ParseDpkgStatus(readStatus(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 116 {
		t.Errorf("installed packages = %d, want 116", len(m))
	}
	for i := 1; i < len(m); i++ {
		if m[i-1].Name >= m[i].Name {
			t.Fatalf("manifest not sorted at %d: %s, %s", i, m[i-1].Name, m[i].Name)
		}
	}
	src := "Package: a\nStatus: install ok installed\nVersion: 1\nArchitecture: amd64\nDescription: x\n more\n\n" +
		"Package: b\nStatus: deinstall ok config-files\nVersion: 2\n\n" +
		"Package: c\nStatus: install ok installed\nVersion: 1:2.0-1\nArchitecture: all\n"
	m, err = ParseDpkgStatus([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(m.Render()), "a=1 amd64\nc=1:2.0-1 all\n"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	if !strings.HasPrefix(m.Hash(), "sha256:") || len(m.Hash()) != 71 {
		t.Errorf("Hash = %q", m.Hash())
	}
	if _, err := ParseDpkgStatus([]byte("Package: a\nStatus: install ok installed\n\n")); err == nil {
		t.Error("an installed package without Version was accepted")
	}
	if _, err := ParseDpkgStatus([]byte("Package a\n")); err == nil {
		t.Error("a line without a colon was accepted")
	}
}

func TestManifestDiff(t *testing.T) {
	r := &Recipe{Name: "x", Suite: "bookworm", Packages: []Package{{"a", "1"}, {"b", "2"}, {"c", "3"}}}
	m := Manifest{{"a", "1", "amd64"}, {"b", "2.1", "amd64"}, {"d", "4", "all"}}
	want := []string{"b: listed at 2, installed 2.1", "c: listed at 3, not installed", "d: installed 4, not listed"}
	if got := m.Diff(r, false); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if got := m.Diff(r, true); len(got) != 2 {
		t.Errorf("Diff(allowExtra) = %q, want the two listed-package problems", got)
	}
	if got := string(m.Recipe("bookworm")); got != "suite bookworm\na=1\nb=2.1\nd=4\n" {
		t.Errorf("Recipe = %q", got)
	}
}

func TestSources(t *testing.T) {
	root := t.TempDir()
	must := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must("etc/apt/sources.list", "# old style\ndeb [arch=amd64 signed-by=/k.gpg] http://a.example.invalid/debian/ bookworm main contrib\ndeb-src http://a.example.invalid/debian bookworm main\n")
	must("etc/apt/sources.list.d/debian.sources", "Types: deb\n# a comment\nURIs: http://b.example.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"+
		"Types: deb\nURIs: http://b.example.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n\n"+
		"Types: deb\nURIs: http://c.example.invalid/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n")
	must("etc/apt/sources.list.d/other.list", "deb http://d.example.invalid/ nodistro main\n")
	must("etc/apt/sources.list.d/x.list.disabled-by-farm", "deb http://e.example.invalid/debian bookworm main\n")
	all, err := HostSources(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("HostSources = %+v, want 4 sources", all)
	}
	got, err := SourcesFor("bookworm", all)
	if err != nil {
		t.Fatal(err)
	}
	want := []SuiteSource{
		{"http://a.example.invalid/debian", "bookworm"},
		{"http://b.example.invalid/debian", "bookworm"},
		{"http://b.example.invalid/debian", "bookworm-updates"},
		{"http://b.example.invalid/debian-security", "bookworm-security"},
	}
	if len(got) != len(want) {
		t.Fatalf("SourcesFor = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("SourcesFor[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := SourcesFor("trixie", all); err == nil || !strings.Contains(err.Error(), "no apt source of this machine serves suite trixie") {
		t.Errorf("SourcesFor(trixie) = %v, want a refusal naming the suite", err)
	}
}

// TestHostSources reads this machine's real apt configuration: on a Debian
// machine it must name a source for its own suite.
func TestHostSources(t *testing.T) {
	osr, err := os.ReadFile("/etc/os-release")
	if err != nil || !bytes.Contains(osr, []byte("ID=debian")) {
		t.Skip("not a Debian machine: its apt sources serve no Debian suite")
	}
	all, err := HostSources("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SourcesFor("bookworm", all); err != nil && bytes.Contains(osr, []byte("bookworm")) {
		t.Errorf("SourcesFor(bookworm) on a bookworm machine: %v", err)
	}
}

// TestBuild builds the generic image from scratch into a temporary cache,
// checks it against the recipe and the manifest hash recorded in
// images/generic/manifest.sha256 (the hash two builds gave), and that
// Lookup refuses the image once a package version in its root is altered.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building an image takes minutes")
	}
	if os.Geteuid() != 0 {
		t.Skip("building an image needs root (debootstrap, chroot)")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (apt-get install debootstrap)")
	}
	r, err := LoadRecipe("generic")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{CacheDir: t.TempDir()}
	img, err := Build(t.Context(), r, opts)
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			t.Logf("build log tail:\n%s", be.Tail)
		}
		t.Fatal(err)
	}
	want, err := os.ReadFile("generic/manifest.sha256")
	if err != nil {
		t.Fatal(err)
	}
	if got := img.ManifestHash; got != strings.TrimSpace(string(want)) {
		t.Errorf("manifest hash = %s, want %s (images/generic/manifest.sha256)", got, strings.TrimSpace(string(want)))
	}
	for _, p := range []string{"bin/bash", "usr/bin/strace", "usr/bin/python3", "usr/bin/make", "usr/bin/gawk"} {
		if _, err := os.Stat(filepath.Join(img.Root, p)); err != nil {
			t.Errorf("image root lacks %s: %v", p, err)
		}
	}
	for _, p := range []string{"etc/apt/sources.list"} {
		if _, err := os.Stat(filepath.Join(img.Root, p)); err == nil {
			t.Errorf("image root still has %s, which names the machine's mirror", p)
		}
	}
	again, err := Build(t.Context(), r, opts)
	if err != nil || !again.Cached || again.ManifestHash != img.ManifestHash {
		t.Errorf("second Build = %+v, %v; want the checked cached image", again, err)
	}
	status := filepath.Join(img.Root, "var/lib/dpkg/status")
	st, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	tampered := uninstall(t, st, "bash")
	if err := os.WriteFile(status, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(r, opts); err == nil || !strings.Contains(err.Error(), "hash to") {
		t.Errorf("Lookup after altering the root's dpkg status = %v, want a manifest hash refusal", err)
	}
}

// uninstall marks pkg's stanza of a dpkg status file as removed (config
// files left), as `dpkg --remove` would.
func uninstall(t *testing.T, st []byte, pkg string) []byte {
	t.Helper()
	i := bytes.Index(st, []byte("\nPackage: "+pkg+"\n"))
	if i < 0 {
		t.Fatalf("no stanza of %s in the dpkg status", pkg)
	}
	const inst, removed = "Status: install ok installed\n", "Status: deinstall ok config-files\n"
	j := bytes.Index(st[i:], []byte(inst))
	end := bytes.Index(st[i+1:], []byte("\n\n"))
	if j < 0 || (end >= 0 && j > end) {
		t.Fatalf("the stanza of %s is not installed", pkg)
	}
	out := append([]byte{}, st[:i+j]...)
	out = append(out, removed...)
	return append(out, st[i+j+len(inst):]...)
}

// TestLookup checks a cached image against its record: a root whose dpkg
// status matches image.json and manifest.txt is accepted; a package removed
// from it, or a manifest.txt edited by hand, is refused. The root is the real
// status file of a generic image (testdata), so no build is needed.
func TestLookup(t *testing.T) {
	r, err := LoadRecipe("generic")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	dir := filepath.Join(cache, r.DirName())
	status := filepath.Join(dir, "root", "var", "lib", "dpkg", "status")
	if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
		t.Fatal(err)
	}
	st := readStatus(t)
	m, err := ParseDpkgStatus(st)
	if err != nil {
		t.Fatal(err)
	}
	rec := `{"schema_version": 1, "name": "generic", "recipe_key": "` + r.Key() + `", "manifest_sha256": "` + m.Hash() + `"}`
	for p, b := range map[string][]byte{status: st, filepath.Join(dir, "manifest.txt"): m.Render(), filepath.Join(dir, "image.json"): []byte(rec)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{CacheDir: cache}
	img, err := Lookup(r, opts)
	if err != nil {
		t.Fatalf("Lookup of a matching image: %v", err)
	}
	if want, _ := os.ReadFile("generic/manifest.sha256"); img.ManifestHash != strings.TrimSpace(string(want)) {
		t.Errorf("manifest hash of the testdata root = %s, want images/generic/manifest.sha256 %s", img.ManifestHash, want)
	}
	if img.Root != filepath.Join(dir, "root") {
		t.Errorf("Root = %s", img.Root)
	}
	if _, err := Lookup(r, Options{CacheDir: t.TempDir()}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Lookup in an empty cache = %v, want ErrNotBuilt", err)
	}
	removed := uninstall(t, st, "bash")
	if err := os.WriteFile(status, removed, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(r, opts); err == nil || !strings.Contains(err.Error(), "hash to") {
		t.Errorf("Lookup with bash removed from the root = %v, want a manifest hash refusal", err)
	}
	if err := os.WriteFile(status, st, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.txt"), append(m.Render(), "extra=1 all\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(r, opts); err == nil {
		t.Error("Lookup with an edited manifest.txt succeeded")
	}
}

func FuzzParseRecipe(f *testing.F) {
	f.Add([]byte("suite bookworm\nbash=5.2.15-2+b13\n"))
	f.Add([]byte("# x\nsuite bookworm\nsed=4.9-1+deb12u1 # y\ndiffutils=1:3.8-4\n"))
	f.Add([]byte("suite a\nsuite b\nx=\n=1\n"))
	if b, err := recipeFS.ReadFile("generic/packages.txt"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := ParseRecipe("fuzz", "f", src)
		if err != nil {
			if r != nil {
				t.Fatal("an error came with a recipe")
			}
			return
		}
		r2, err := ParseRecipe("fuzz", "f", r.Render())
		if err != nil {
			t.Fatalf("Render of a parsed recipe does not parse: %v\n%s", err, r.Render())
		}
		if !bytes.Equal(r2.Render(), r.Render()) {
			t.Fatalf("Render is not canonical:\n%s\n%s", r.Render(), r2.Render())
		}
	})
}

func FuzzParseDpkgStatus(f *testing.F) {
	f.Add(readStatus(f)[:4096])
	f.Add([]byte("Package: a\nStatus: install ok installed\nVersion: 1\n\n"))
	f.Add([]byte("Package: a\n x\n\n\nStatus: install ok installed\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := ParseDpkgStatus(src)
		if err != nil {
			if m != nil {
				t.Fatal("an error came with a manifest")
			}
			return
		}
		for _, p := range m {
			if p.Name == "" || p.Version == "" {
				t.Fatalf("manifest entry without name or version: %+v", p)
			}
		}
	})
}

func BenchmarkParseDpkgStatus(b *testing.B) {
	src := readStatus(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := ParseDpkgStatus(src); err != nil {
			b.Fatal(err)
		}
	}
}
