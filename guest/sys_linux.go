package guest

import (
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// syscaller is the part of the kernel PID 1 changes; tests replace it with a
// recorder (as lmb/vimto does in init.go).
type syscaller interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
	MkdirAll(path string, perm os.FileMode) error
	Symlink(oldname, newname string) error
	Chdir(dir string) error
	Chroot(dir string) error
	// CopyFile copies src to dst (symlinks stay symlinks), creating
	// dst's parents; an existing dst is left alone when keep is set.
	CopyFile(src, dst string, perm os.FileMode, keep bool) error
	Remove(path string) error
	Mknod(path string, mode uint32, dev int) error
	LoopbackUp() error
	Sethostname(name string) error
}

type realSys struct{}

func (realSys) Mount(source, target, fstype string, flags uintptr, data string) error {
	return unix.Mount(source, target, fstype, flags, data)
}
func (realSys) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (realSys) Symlink(oldname, newname string) error        { return os.Symlink(oldname, newname) }
func (realSys) Chdir(dir string) error                       { return unix.Chdir(dir) }
func (realSys) Chroot(dir string) error                      { return unix.Chroot(dir) }
func (realSys) Remove(path string) error                     { return os.Remove(path) }
func (realSys) Mknod(path string, mode uint32, dev int) error {
	// The umask would take the device's 0666 away.
	old := unix.Umask(0)
	defer unix.Umask(old)
	return unix.Mknod(path, mode, dev)
}
func (realSys) Sethostname(name string) error { return unix.Sethostname([]byte(name)) }

func (realSys) CopyFile(src, dst string, perm os.FileMode, keep bool) error {
	if keep {
		if _, err := os.Lstat(dst); err == nil {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// LoopbackUp sets IFF_UP on lo, without which binding 127.0.0.1 fails with
// EADDRNOTAVAIL.
func (realSys) LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
