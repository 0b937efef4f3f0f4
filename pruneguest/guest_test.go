package pruneguest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/pruner/prune"
)

// TestGuestRefusesNonDisposable: the guest side prunes only where a prune
// may delete (a guest, or LOCKSTEP_DISPOSABLE=1), and refuses before it
// touches the output directory; a malformed root digest is refused too.
func TestGuestRefusesNonDisposable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	opts := GuestOptions{Key: "broken", Exercises: "../testdata/exercises", Out: out}
	t.Setenv("LOCKSTEP_DISPOSABLE", "")
	t.Setenv("LOCKSTEP_GUEST", "")
	if _, err := Guest(t.Context(), opts); !errors.Is(err, prune.ErrNotDisposable) {
		t.Errorf("Guest on a machine not declared disposable = %v, want prune.ErrNotDisposable", err)
	}
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	opts.RootDigest = "sha256:nothex"
	if _, err := Guest(t.Context(), opts); err == nil {
		t.Error("Guest took the malformed root digest sha256:nothex")
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Guest made its output directory: %v", err)
	}
}
