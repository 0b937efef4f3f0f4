//go:build linux

package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/u-root/u-root/pkg/kmodule"
)

// TestKmoduleNeedsModulesDep holds u-root's pkg/kmodule (v0.16.0) to the
// module trees lockstep is given (docs/design.md, "u-root's packages"):
// it resolves dependencies only from depmod's modules.dep, which an
// unpacked distribution kernel package (what --modules and make bench's
// reference kernel are: dpkg-deb -x, depmod never run) does not hold, so
// it refuses the tree ResolveModules reads. Given the modules.dep depmod
// would write for the same three modules, it finds the same files, every
// dependency first.
func TestKmoduleNeedsModulesDep(t *testing.T) {
	const release = "6.1.0-50-amd64"
	root := t.TempDir()
	tree := filepath.Join(root, "lib", "modules", release)
	if err := os.CopyFS(tree, os.DirFS(filepath.Join("testdata", "modules", release))); err != nil {
		t.Fatal(err)
	}
	want, err := ResolveModules(tree, []string{"virtio_rng"})
	if err != nil {
		t.Fatalf("ResolveModules: %v", err)
	}
	var mu sync.Mutex
	var got []string
	opts := kmodule.ProbeOpts{RootDir: root, KVer: release, IgnoreProcMods: true,
		DryRunCB: func(p string) { mu.Lock(); got = append(got, p); mu.Unlock() }}
	if _, err := kmodule.NewProber(opts); err == nil || !strings.Contains(err.Error(), "modules.dep") {
		t.Fatalf("kmodule on a tree without modules.dep = %v; it used to refuse it", err)
	}
	dep := "kernel/drivers/virtio/virtio.ko:\nkernel/drivers/virtio/virtio_ring.ko:\n" +
		"kernel/drivers/char/hw_random/virtio-rng.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n"
	if err := os.WriteFile(filepath.Join(tree, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := kmodule.NewProber(opts)
	if err != nil {
		t.Fatalf("kmodule with modules.dep: %v", err)
	}
	if err := p.Probe("virtio_rng", ""); err != nil {
		t.Fatalf("Probe(virtio_rng) dry run: %v", err)
	}
	// Siblings come in any order (kmodule loads them in parallel); the
	// module asked for comes last.
	if len(got) != len(want) || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("kmodule's order %v, ResolveModules's %v: want the same files, virtio-rng last", got, want)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("kmodule found %v, ResolveModules %v", got, want)
	}
}
