package verify

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// baseDir writes files (name → content) into a new directory.
func baseDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReadBaseDir: each BaseLanguage-<key>.cfg is a matrix of its key's
// reference exercises; an exercise's remainder applies on every kernel, its
// ABI-10 sidecar only on kernels of ABI 10 or later (and on a bzImage of
// unknown ABI, whose guest refuses what it cannot enforce).
func TestReadBaseDir(t *testing.T) {
	dir := baseDir(t, map[string]string{
		"BaseLanguage-generic.cfg":                "[read]\n/usr\n",
		"BaseLanguage-fixture.cfg":                "[read]\n/usr\n",
		"BasePhobos.cfg":                          "[read]\n/usr\n",
		"exercises/fixture_udp-fixture.cfg":       "[limits]\ntimeout=600\n",
		"exercises/fixture_udp-fixture.abi10.cfg": "[bind]\nallow 5000 udp\n",
	})
	sets, err := ReadBaseDir(dir, "../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range sets {
		keys = append(keys, s.Key)
	}
	if want := []string{"fixture", "generic"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	if n := len(sets[1].Layers); n != 0 {
		t.Errorf("generic has %d layers, want none", n)
	}
	for _, c := range []struct {
		abi  int
		want []string
	}{{6, []string{"fixture_udp-fixture.cfg"}}, {10, []string{"fixture_udp-fixture.cfg", "fixture_udp-fixture.abi10.cfg"}},
		{11, []string{"fixture_udp-fixture.cfg", "fixture_udp-fixture.abi10.cfg"}}, {0, []string{"fixture_udp-fixture.cfg", "fixture_udp-fixture.abi10.cfg"}}} {
		var got []string
		for _, f := range layerNames(sets[0].Layers, Kernel{Name: "k", ABI: c.abi}, "udp-fixture") {
			got = append(got, filepath.Base(f))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ABI %d: layers %v, want %v", c.abi, got, c.want)
		}
	}
	if got := layerNames(sets[0].Layers, Kernel{ABI: 10}, "other"); len(got) != 0 {
		t.Errorf("another exercise's cell got %v, want no layer", got)
	}
}

// TestReadBaseDirRefuses: a base with no exercise to verify it against, an
// exercise file no base's exercise uses and a policy that does not parse
// are each named, all at once; a directory with no base is refused.
func TestReadBaseDirRefuses(t *testing.T) {
	dir := baseDir(t, map[string]string{
		"BaseLanguage-generic.cfg":                    "[read]\n/usr\n",
		"BaseLanguage-swift.cfg":                      "[read]\n/usr\n",
		"exercises/generic_gone.cfg":                  "[limits]\ntimeout=60\n",
		"exercises/generic_shell-reference.cfg":       "[limits]\ntimeout=x\n",
		"exercises/generic_shell-reference.abi10.cfg": "[bind]\nallow 5000 udp\n",
	})
	_, err := ReadBaseDir(dir, "../testdata/exercises")
	for _, want := range []string{`BaseLanguage-swift.cfg: no exercise of key "swift"`, "generic_gone.cfg belongs to no base's exercise",
		"generic_shell-reference.cfg:2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadBaseDir = %v, want it to name %q", err, want)
		}
	}
	if _, err := ReadBaseDir(t.TempDir(), "../testdata/exercises"); err == nil || !strings.Contains(err.Error(), "holds no BaseLanguage-<key>.cfg") {
		t.Errorf("ReadBaseDir of an empty directory = %v, want a refusal", err)
	}
}
