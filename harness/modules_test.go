package harness

import (
	"os"
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

// TestResolveModulesBuiltin: a module the kernel has built in (in
// modules.builtin, as on kernels with crc32c=y) needs no file.
func TestResolveModulesBuiltin(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "modules", "6.1.0-50-amd64")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveModules(dir, []string{"crc32c_generic", "virtio"}); err == nil {
		t.Fatal("ResolveModules found crc32c_generic, which the testdata lacks")
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/crypto/crc32c_generic.ko\nkernel/fs/ext4/ext4.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ResolveModules(dir, []string{"crc32c_generic", "virtio"})
	if err != nil {
		t.Fatalf("ResolveModules with crc32c_generic built in: %v", err)
	}
	if len(got) != 1 || filepath.Base(got[0]) != "virtio.ko" {
		t.Errorf("ResolveModules = %v, want only virtio.ko (crc32c_generic is built in)", got)
	}
}
