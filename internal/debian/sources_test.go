package debian

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, path, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestArchiveURIs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sources.list"), `# one-line format
deb http://one.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://two.example/debian/ bookworm-updates main # trailing
deb http://sec.example/debian-security bookworm-security main
deb [signed-by=/usr/share/keyrings/vendor.gpg] https://vendor.example/apt stable main
deb http://archive.invalid/ubuntu jammy main
`)
	write(t, filepath.Join(dir, "sources.list.d", "debian.sources"), `Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://three.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://sec.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

types: deb deb-src
uris: http://one.example/debian
  http://four.example/debian
suites: trixie
components: main
`)
	write(t, filepath.Join(dir, "sources.list.d", "off.sources"), "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: sid\n")
	write(t, filepath.Join(dir, "sources.list.d", "node.sources"), "Types: deb\nURIs: https://node.example/node_20.x\nSuites: nodistro\nSigned-By: /usr/share/keyrings/nodesource.gpg\n")
	write(t, filepath.Join(dir, "sources.list.d", "old.list.disabled"), "this is not read\n")
	sources, err := ReadAptSources(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := ArchiveURIs(sources)
	want := []string{"http://one.example/debian", "http://two.example/debian", "http://three.example/debian", "http://four.example/debian"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ArchiveURIs = %q, want %q", got, want)
	}
	if len(sources) != 11 || sources[1].Is("deb") || !sources[1].Is("deb-src") || sources[10].Enabled {
		t.Errorf("ReadAptSources = %d entries %+v", len(sources), sources)
	}
}

// TestThisMachinesSources: the deb822 file this machine's apt reads,
// captured with `cp /etc/apt/sources.list.d/debian.sources testdata/apt/sources.list.d/`.
func TestThisMachinesSources(t *testing.T) {
	sources, err := ReadAptSources("testdata/apt")
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) != 2 || !reflect.DeepEqual(sources[0].Suites, []string{"bookworm", "bookworm-updates"}) ||
		sources[0].SignedBy != "/usr/share/keyrings/debian-archive-keyring.gpg" || sources[1].Suites[0] != "bookworm-security" {
		t.Fatalf("ReadAptSources(testdata/apt) = %+v", sources)
	}
	if u := ArchiveURIs(sources); len(u) != 1 || !strings.HasSuffix(u[0], "/debian") {
		t.Errorf("ArchiveURIs = %q, want the one archive (not the security one)", u)
	}
}

func TestParseSourcesErrors(t *testing.T) {
	for _, tc := range []struct{ File, Src, Want string }{
		{"a.list", "deb http://x.example/debian\n", "a.list:1: a deb line needs a URI and a suite"},
		{"a.list", "\n\nrpm http://x.example/ a b\n", `a.list:3: type "rpm" is not deb or deb-src`},
		{"a.sources", "Types: deb\nURIs: http://x.example/debian\n", "a.sources: stanza 1 needs Types, URIs and Suites"},
		{"a.sources", "Types: deb\nno colon here\n", "a.sources: paragraph 1: "},
	} {
		if _, err := ParseSources(tc.File, []byte(tc.Src)); err == nil || !strings.Contains(err.Error(), tc.Want) {
			t.Errorf("ParseSources(%s, %q) = %v, want %q", tc.File, tc.Src, err, tc.Want)
		}
	}
}

func TestUnsignedUbuntuIsNotDebian(t *testing.T) {
	s, err := ParseSources("sources.list", []byte("deb http://archive.invalid/ubuntu jammy main\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u := ArchiveURIs(s); len(u) != 0 {
		t.Errorf("an unsigned Ubuntu entry counts as Debian's archive: %q", u)
	}
}

func FuzzParseSources(f *testing.F) {
	src, _ := os.ReadFile("testdata/apt/sources.list.d/debian.sources")
	f.Add("b.sources", src)
	f.Add("a.list", []byte("deb [signed-by=x] http://a.example/debian sid main\n"))
	f.Add("b.sources", []byte("Types: deb\nURIs: http://b.example/debian\n x\nSuites: sid\n"))
	f.Fuzz(func(t *testing.T, name string, src []byte) {
		sources, err := ParseSources(name, src)
		if err != nil {
			return
		}
		for _, s := range sources {
			if s.Enabled && (len(s.URIs) == 0 || len(s.Suites) == 0 || len(s.Types) == 0) {
				t.Fatalf("accepted an entry without URIs, suites or types: %+v", s)
			}
		}
		for _, u := range ArchiveURIs(sources) {
			if u == "" || strings.ContainsAny(u, " \t\n") {
				t.Fatalf("URI %q", u)
			}
		}
	})
}
