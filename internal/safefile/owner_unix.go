//go:build unix

package safefile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives f the owner and group of old, the file at target it
// replaces, when they differ from f's own.
func keepOwner(f *os.File, target string, old fs.FileInfo) error {
	want, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if have, ok := st.Sys().(*syscall.Stat_t); ok && have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		return fmt.Errorf("cannot keep the owner %d:%d of %s (%w); write it as its owner or as root", want.Uid, want.Gid, target, err)
	}
	return nil
}
