package harness

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResolveModules(t *testing.T) {
	dir := filepath.Join("testdata", "modules", "6.1.0-50-amd64")
	got, err := ResolveModules(dir, []string{"virtio_rng", "virtio"})
	if err != nil {
		t.Fatalf("ResolveModules: %v", err)
	}
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	// virtio-rng depends on virtio and virtio_ring; virtio on nothing
	// (as its .modinfo says); each comes once, after its dependencies.
	want := []string{"virtio.ko", "virtio_ring.ko", "virtio-rng.ko"}
	if !slices.Equal(names, want) {
		t.Errorf("ResolveModules = %v, want %v", names, want)
	}
	if _, err := ResolveModules(dir, []string{"9p"}); err == nil || !strings.Contains(err.Error(), "module 9p: not found") {
		t.Errorf("ResolveModules(9p) = %v, want a not-found error", err)
	}
}
