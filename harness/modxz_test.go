package harness

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveModulesCompressed: Debian 13's modules are .ko.xz; their
// depends= is read through the compression, so 9pnet_virtio comes after
// 9pnet, which comes after netfs. The three files were copied from linux-image-6.12.117+deb13-amd64
// 6.12.117-1 (kernel/debian-images.pins) as unpacked by lockstep:
//
//	cp <cache>/<key>/modules/kernel/net/9p/{9pnet.ko.xz,9pnet_virtio.ko.xz} harness/testdata/modules-xz/kernel/net/9p/
//	cp <cache>/<key>/modules/kernel/fs/netfs/netfs.ko.xz harness/testdata/modules-xz/kernel/fs/netfs/
func TestResolveModulesCompressed(t *testing.T) {
	got, err := ResolveModules("testdata/modules-xz", []string{"9pnet_virtio"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	if strings.Join(names, " ") != "netfs.ko.xz 9pnet.ko.xz 9pnet_virtio.ko.xz" {
		t.Errorf("ResolveModules = %q, want netfs, 9pnet, then 9pnet_virtio", names)
	}
}
