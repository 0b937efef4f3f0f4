package guest

import (
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"golang.org/x/sys/unix"
)

// Mount points PID 1 uses while it assembles the new root.
const (
	lowerDir = "/mnt/lower" // the read-only root (9p or a block device)
	rwDir    = "/mnt/rw"    // tmpfs with the overlay's upper and work dirs
	newRoot  = "/mnt/root"  // the overlay, which becomes /
	// extraDir holds files of the initramfs (strace and its libraries)
	// that are copied into the new root where it lacks them.
	extraDir = "/extra"
)

// 9p mount options: cache=loose,msize=512000 measured fine here (docs/harness.md).
func ninepOpts(msize int) string {
	if msize <= 0 {
		msize = 512000
	}
	return "trans=virtio,version=9p2000.L,cache=loose,msize=" + strconv.Itoa(msize)
}

// earlyMounts mounts the kernel file systems in the initramfs; they move
// into the new root later, submounts included.
func earlyMounts(s syscaller) error {
	steps := []struct {
		src, dst, fstype string
		flags            uintptr
		data             string
		optional         bool // a kernel without it (--kernel FILE) still boots the job
	}{
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755", false},
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", false},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", false},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "ptmxmode=0666,mode=0620", false},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777", false},
		{"securityfs", "/sys/kernel/security", "securityfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", false},
		// cgroup v2 with the pids and memory controllers: the enforcer caps
		// nproc there, which RLIMIT_NPROC cannot do for the guest's root.
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "", true},
	}
	for _, m := range steps {
		if err := s.MkdirAll(m.dst, 0o755); err != nil {
			if m.optional { // sysfs has no /sys/fs/cgroup without CONFIG_CGROUPS
				continue
			}
			return fmt.Errorf("mkdir %s: %w", m.dst, err)
		}
		err := s.Mount(m.src, m.dst, m.fstype, m.flags, m.data)
		if err != nil && (m.optional || (m.fstype == "devtmpfs" && err == unix.EBUSY)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	for _, l := range [][2]string{
		{"/proc/self/fd", "/dev/fd"},
		{"/proc/self/fd/0", "/dev/stdin"},
		{"/proc/self/fd/1", "/dev/stdout"},
		{"/proc/self/fd/2", "/dev/stderr"},
	} {
		s.Remove(l[1])
		if err := s.Symlink(l[0], l[1]); err != nil {
			return fmt.Errorf("symlink %s -> %s: %w", l[1], l[0], err)
		}
	}
	// /dev/ptmx is the character device a host's devtmpfs makes, not a
	// link to pts/ptmx: a policy pruned on a host names /dev/ptmx, and
	// lockstep run refuses a section that changes files naming a link, so
	// a pseudo-terminal exercise's base could not run in a guest. The
	// device finds the devpts instance mounted at pts beside it.
	s.Remove(ptmxPath)
	if err := s.Mknod(ptmxPath, unix.S_IFCHR|0o666, int(unix.Mkdev(ptmxMajor, ptmxMinor))); err != nil {
		return fmt.Errorf("mknod %s: %w", ptmxPath, err)
	}
	return nil
}

// ptmxPath is the pseudo-terminal multiplexer, character device 5:2.
const (
	ptmxPath             = "/dev/ptmx"
	ptmxMajor, ptmxMinor = 5, 2
)

// deviceWait bounds how long PID 1 waits for the root's block device: the
// virtio-blk driver may probe it after PID 1 starts (or after its module
// was loaded).
var deviceWait = 30 * time.Second

// mountLower mounts the root read-only on lowerDir: the 9p export, or the
// block device once it has appeared.
func mountLower(s syscaller, r *proto.Root) error {
	if r.Device == "" {
		if err := s.Mount(r.Tag, lowerDir, "9p", unix.MS_RDONLY, ninepOpts(r.Msize)); err != nil {
			return fmt.Errorf("mount 9p root (tag %s): %w", r.Tag, err)
		}
		return nil
	}
	fstype := r.FSType
	if fstype == "" {
		fstype = "ext4"
	}
	deadline := time.Now().Add(deviceWait)
	for {
		err := s.Mount(r.Device, lowerDir, fstype, unix.MS_RDONLY, "")
		if err == nil {
			return nil
		}
		if err != unix.ENOENT && err != unix.ENXIO {
			return fmt.Errorf("mount root %s (%s) read-only: %w", r.Device, fstype, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mount root %s (%s) read-only: %w after %s: does the kernel have virtio-blk and %s (with --modules: are they loaded)?", r.Device, fstype, err, deviceWait, fstype)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// switchRoot mounts the root (9p or a block device) read-only under a tmpfs overlay, moves the
// kernel file systems into it, gives it fresh tmpfs /run, /tmp and /var/tmp, copies
// the init binary to proto.GuestBinary, mounts the shares and the extras,
// and makes it the root (the switch_root dance: MS_MOVE onto /, chroot).
func switchRoot(s syscaller, job *proto.Job, self string) error {
	if err := mountOverlay(s, job.Root); err != nil {
		return err
	}
	if err := moveKernelFS(s); err != nil {
		return err
	}
	if err := mountScratch(s); err != nil {
		return err
	}
	if err := copyIn(s, job, self); err != nil {
		return err
	}
	if err := mountShares(s, job.Shares); err != nil {
		return err
	}
	return enter(s)
}

// mountOverlay mounts the root read-only at lowerDir and a tmpfs overlay
// over it at newRoot.
func mountOverlay(s syscaller, r *proto.Root) error {
	for _, d := range []string{lowerDir, rwDir, newRoot} {
		if err := s.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	if err := mountLower(s, r); err != nil {
		return err
	}
	if err := s.Mount("tmpfs", rwDir, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs for the overlay: %w", err)
	}
	for _, d := range []string{rwDir + "/upper", rwDir + "/work"} {
		if err := s.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	opts := "lowerdir=" + lowerDir + ",upperdir=" + rwDir + "/upper,workdir=" + rwDir + "/work"
	if err := s.Mount("overlay", newRoot, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay over the root: %w", err)
	}
	return nil
}

// moveKernelFS moves /dev, /proc and /sys into the new root.
func moveKernelFS(s syscaller) error {
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := s.MkdirAll(newRoot+d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s in the new root: %w", d, err)
		}
		if err := s.Mount(d, newRoot+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s into the new root: %w", d, err)
		}
	}
	return nil
}

// mountScratch gives the new root fresh tmpfs /run, /tmp and /var/tmp, and
// the results and share directories. /var/tmp holds the exercises' working
// directory (/var/tmp/testing-dir): under the overlay its lower layer would
// be the host's live /var/tmp over 9p, and a directory emptied in place
// there (the runs' fresh copies keep it for the observer's lanes) is no
// opaque one, so what host processes put in or took from the host's
// directory showed through (a guest prune's run found the host's
// test-reports listed and then gone: docs/reliability.md).
func mountScratch(s syscaller) error {
	for _, m := range []struct{ dir, mode string }{{"/run", "0755"}, {"/tmp", "1777"}, {"/var/tmp", "1777"}} {
		if err := s.MkdirAll(newRoot+m.dir, 0o755); err != nil {
			return fmt.Errorf("mkdir %s in the new root: %w", m.dir, err)
		}
		if err := s.Mount("tmpfs", newRoot+m.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+m.mode); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", m.dir, err)
		}
	}
	for _, d := range []string{proto.ResultsDir, proto.ShareDir} {
		if err := s.MkdirAll(newRoot+d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	return nil
}

// copyIn copies the init binary to proto.GuestBinary and the job's extras
// into the new root.
func copyIn(s syscaller, job *proto.Job, self string) error {
	if err := s.CopyFile(self, newRoot+proto.GuestBinary, 0o755, false); err != nil {
		return fmt.Errorf("copy lockstep to %s: %w", proto.GuestBinary, err)
	}
	for _, e := range job.Extra {
		if err := s.CopyFile(path.Join(extraDir, e), path.Join(newRoot, e), 0o755, true); err != nil {
			return fmt.Errorf("copy %s into the new root: %w", e, err)
		}
	}
	return nil
}

// mountShares mounts each 9p share read-only, at its path or
// proto.ShareDir/<index>.
func mountShares(s syscaller, shares []proto.Share) error {
	for i, sh := range shares {
		dst := sh.Path
		if dst == "" {
			dst = path.Join(proto.ShareDir, strconv.Itoa(i))
		}
		if err := s.MkdirAll(newRoot+dst, 0o755); err != nil {
			return fmt.Errorf("mkdir share %s: %w", dst, err)
		}
		if err := s.Mount(sh.Tag, newRoot+dst, "9p", unix.MS_RDONLY, ninepOpts(sh.Msize)); err != nil {
			return fmt.Errorf("mount share %s (tag %s): %w", dst, sh.Tag, err)
		}
	}
	return nil
}

// enter makes the new root the root: MS_MOVE onto /, then chroot.
func enter(s syscaller) error {
	if err := s.Chdir(newRoot); err != nil {
		return fmt.Errorf("chdir %s: %w", newRoot, err)
	}
	if err := s.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the new root onto /: %w", err)
	}
	if err := s.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the new root: %w", err)
	}
	if err := s.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	return nil
}
