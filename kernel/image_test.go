package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebianImagePins: the repository's pin file of Debian's images parses,
// adds two debian-image pins and redefines no shipped one.
func TestDebianImagePins(t *testing.T) {
	src, err := os.ReadFile("debian-images.pins")
	if err != nil {
		t.Fatal(err)
	}
	pins, err := ParsePins("debian-images.pins", src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mergePins(Pins(), pins); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"6.1.0-50-amd64": 2, "6.12.117+deb13-amd64": 6}
	for _, p := range pins {
		if p.Source != SourceDebianImage || want[p.Version] != p.ABI || p.Release() != p.Version {
			t.Errorf("pin %+v (release %s)", p, p.Release())
		}
		delete(want, p.Version)
	}
	if len(want) != 0 {
		t.Errorf("missing pins %v", want)
	}
}

func TestImageRecord(t *testing.T) {
	r := &ImageRecord{Row: imageRow, Release: "6.1.0-57-amd64", Modules: map[string]string{
		"kernel/fs/9p/9p.ko": strings.Repeat("a", 64), "modules.builtin": strings.Repeat("b", 64)}}
	got, err := ParseImageRecord(r.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got.Row != r.Row || got.Release != r.Release || len(got.Modules) != 2 || got.Modules["modules.builtin"] != strings.Repeat("b", 64) {
		t.Errorf("round trip = %+v, want %+v", got, r)
	}
	for _, bad := range []string{
		"format lockstep-kernel-image 0\nrow x\nrelease y\n",
		"row x\nrelease y\nmodule abc kernel/x.ko\n",
		"row x\nrelease y\nmodule " + strings.Repeat("a", 64) + " ../x.ko\n",
		"row x\n",
		"row x\nrelease y\ncolour red\n",
	} {
		if _, err := ParseImageRecord([]byte(bad)); err == nil {
			t.Errorf("ParseImageRecord(%q) accepted", bad)
		}
	}
}

// TestImageCheckModules: a module file altered after unpacking is refused,
// as is one the record does not list.
func TestImageCheckModules(t *testing.T) {
	dir := t.TempDir()
	mod := filepath.Join(dir, "kernel", "x.ko")
	if err := os.MkdirAll(filepath.Dir(mod), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mod, []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	im := &Image{Modules: dir, Record: &ImageRecord{Modules: map[string]string{"kernel/x.ko": sha256Hex([]byte("module"))}}}
	if err := im.CheckModules([]string{mod}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mod, []byte("altered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := im.CheckModules([]string{mod}); err == nil || !strings.Contains(err.Error(), "sha256 is") {
		t.Errorf("CheckModules of an altered module = %v", err)
	}
	if err := im.CheckModules([]string{filepath.Join(dir, "y.ko")}); err == nil || !strings.Contains(err.Error(), "not in image.txt") {
		t.Errorf("CheckModules of an unlisted module = %v", err)
	}
}

func TestUpstreamVersionAndABI(t *testing.T) {
	for _, tc := range []struct {
		Pkg, Upstream string
		ABI           int
	}{
		{"6.1.176-1", "6.1.176", 2}, {"6.12.117-1", "6.12.117", 6}, {"7.3.4-1~bpo13+1", "7.3.4", 11}, {"1:7.2.13-1", "7.2.13", 10},
	} {
		u := upstreamVersion(tc.Pkg)
		abi, err := releaseABI(u)
		if u != tc.Upstream || err != nil || abi != tc.ABI {
			t.Errorf("%s: upstream %s, ABI %d, %v; want %s, %d", tc.Pkg, u, abi, err, tc.Upstream, tc.ABI)
		}
	}
	if _, err := releaseABI("7.0.1"); err == nil || !strings.Contains(err.Error(), "--abi") {
		t.Errorf("releaseABI(7.0.1) = %v, want an error asking for --abi", err)
	}
}

func FuzzParseImageRecord(f *testing.F) {
	f.Add((&ImageRecord{Row: imageRow, Release: "6.1.0-57-amd64", Modules: map[string]string{"modules.builtin": strings.Repeat("b", 64)}}).Marshal())
	f.Add([]byte("row x\nrelease y\nmodule  \n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := ParseImageRecord(src)
		if err != nil {
			return
		}
		again, err := ParseImageRecord(r.Marshal())
		if err != nil || again.Row != r.Row || again.Release != r.Release || len(again.Modules) != len(r.Modules) {
			t.Fatalf("record %+v does not round-trip: %+v, %v", r, again, err)
		}
	})
}
