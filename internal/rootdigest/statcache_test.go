package rootdigest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestOfCached: a digest taken with the stat cache is the digest of the
// manifest of every file hashed anew, on the first run (cold) and the
// second (warm); a file rewritten in place with the same size changes the
// digest all the same (its ctime moved).
func TestOfCached(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	root := t.TempDir()
	lib := filepath.Join(root, "usr", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(lib, "libx.so")
	if err := os.WriteFile(f, []byte("aaaa"), 0o644); err != nil {
		t.Fatal(err)
	}
	uncached := func() string {
		h := sha256.New()
		if err := Manifest(root, h); err != nil {
			t.Fatal(err)
		}
		return Prefix + hex.EncodeToString(h.Sum(nil))
	}
	for _, run := range []string{"cold", "warm"} {
		d, err := Of(root)
		if err != nil || d != uncached() {
			t.Fatalf("%s Of = %s, %v; want the uncached %s", run, d, err, uncached())
		}
	}
	before, _ := Of(root)
	if err := os.WriteFile(f, []byte("bbbb"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := Of(root)
	if err != nil || after == before || after != uncached() {
		t.Errorf("Of after a same-size rewrite = %s, %v; want %s (was %s)", after, err, uncached(), before)
	}
}
