package fulldisk

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes on a fresh directory and unmounts it
// when tb ends. It skips tb when this process may not mount (not root).
func Mount(tb testing.TB, size int64) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size="+strconv.FormatInt(size, 10)); err != nil {
		if err == unix.EPERM {
			tb.Skipf("mount a tmpfs on %s: %v (the disk-full tests need root)", dir, err)
		}
		tb.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	// Registered after TempDir's removal, so it runs first.
	tb.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Free returns the bytes an unprivileged writer may still use on dir's file
// system.
func Free(tb testing.TB, dir string) int64 {
	tb.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		tb.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Fill writes the file dir/name until at most leave bytes of the file
// system stay free (tmpfs counts whole pages, so leave is best a multiple
// of the page size), and returns the file's path.
func Fill(tb testing.TB, dir, name string, leave int64) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, os.Getpagesize())
	for Free(tb, dir) > leave {
		n := min(int64(len(page)), Free(tb, dir)-leave)
		if _, err := f.Write(page[:n]); err != nil {
			tb.Fatalf("fill %s: %v", p, err)
		}
	}
	return p
}
