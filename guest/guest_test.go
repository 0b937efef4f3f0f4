package guest

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"golang.org/x/sys/unix"
)

func TestResultsRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a/b"), 0o755)
	os.WriteFile(filepath.Join(src, "a/b/f.txt"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(src, "top"), bytes.Repeat([]byte{0, 1}, 1<<16), 0o600)
	os.Symlink("a/b/f.txt", filepath.Join(src, "link"))
	archive, err := PackResults(src)
	if err != nil {
		t.Fatalf("PackResults: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	n, err := UnpackResults(archive, dst)
	if err != nil {
		t.Fatalf("UnpackResults: %v", err)
	}
	if n != 2 {
		t.Errorf("UnpackResults wrote %d files, want 2", n)
	}
	for name, want := range map[string]string{"a/b/f.txt": "hello", "link": "hello"} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "top")); err != nil || fi.Size() != 2<<16 {
		t.Errorf("top: %v, %v", fi, err)
	}
	// A missing directory packs as an empty archive.
	empty, err := PackResults(filepath.Join(src, "missing"))
	if err != nil {
		t.Fatalf("PackResults(missing): %v", err)
	}
	if n, err := UnpackResults(empty, t.TempDir()); err != nil || n != 0 {
		t.Errorf("UnpackResults(empty) = %d, %v", n, err)
	}
}

func tarZstd(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	enc, _ := zstd.NewWriter(nil)
	return enc.EncodeAll(b.Bytes(), nil)
}

func TestUnpackResultsRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		Name string
		Hdrs []*tar.Header
	}{
		{"dotdot", []*tar.Header{{Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}},
		{"absolute", []*tar.Header{{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}},
		{"through symlink", []*tar.Header{
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"},
			{Name: "l/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		}},
		{"device", []*tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := UnpackResults(tarZstd(t, tc.Hdrs...), dir); err == nil {
				t.Errorf("UnpackResults(%s) succeeded, want a refusal", tc.Name)
			}
			if _, err := os.Stat("/tmp/evil"); err == nil {
				t.Errorf("/tmp/evil exists after unpacking %s", tc.Name)
			}
		})
	}
}

func TestParseCmdline(t *testing.T) {
	m := parseCmdline("console=ttyS0 quiet lockstep.job=ab12 lockstep.hook=hang-job virtio_mmio.device=4K@0xfeb00e00:12\n")
	for k, want := range map[string]string{"console": "ttyS0", "quiet": "", "lockstep.job": "ab12", "lockstep.hook": "hang-job", "virtio_mmio.device": "4K@0xfeb00e00:12"} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("parseCmdline()[%q] = %q, %v; want %q", k, got, ok, want)
		}
	}
}

func TestReadJob(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "job.json")
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	for _, tc := range []struct {
		Name, JSON, ID, WantErr string
	}{
		{"good", `{"schema":1,"id":"a","command":["true"]}`, "a", ""},
		{"probe needs no command", `{"schema":1,"id":"a","probe":true}`, "a", ""},
		{"stale initramfs", `{"schema":1,"id":"a","command":["true"]}`, "b", "does not match"},
		{"no id on cmdline", `{"schema":1,"id":"a","command":["true"]}`, "", "does not match"},
		{"schema", `{"schema":2,"id":"a","command":["true"]}`, "a", "schema"},
		{"no command", `{"schema":1,"id":"a"}`, "a", "no command"},
		{"not json", `{`, "a", "decode"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := readJob(write(tc.JSON), tc.ID)
			if tc.WantErr == "" && err != nil || tc.WantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.WantErr)) {
				t.Errorf("readJob(%s, %q) = %v, want error containing %q", tc.JSON, tc.ID, err, tc.WantErr)
			}
		})
	}
}

// fakeSys records what PID 1 asks of the kernel.
type fakeSys struct {
	ops    []string
	failOn string // an op prefix that fails
}

func (f *fakeSys) do(op string) error {
	f.ops = append(f.ops, op)
	if f.failOn != "" && strings.HasPrefix(op, f.failOn) {
		return unix.ENODEV
	}
	return nil
}
func (f *fakeSys) Mount(src, dst, fstype string, flags uintptr, data string) error {
	return f.do(fmt.Sprintf("mount %s %s %s %#x %s", src, dst, fstype, flags, data))
}
func (f *fakeSys) MkdirAll(p string, _ os.FileMode) error { return f.do("mkdir " + p) }
func (f *fakeSys) Symlink(o, n string) error              { return f.do("symlink " + n + " -> " + o) }
func (f *fakeSys) Chdir(d string) error                   { return f.do("chdir " + d) }
func (f *fakeSys) Chroot(d string) error                  { return f.do("chroot " + d) }
func (f *fakeSys) Remove(p string) error                  { return f.do("remove " + p) }
func (f *fakeSys) Mknod(p string, mode uint32, dev int) error {
	return f.do(fmt.Sprintf("mknod %s %#o %d:%d", p, mode, unix.Major(uint64(dev)), unix.Minor(uint64(dev))))
}
func (f *fakeSys) LoopbackUp() error          { return f.do("lo up") }
func (f *fakeSys) Sethostname(n string) error { return f.do("hostname " + n) }
func (f *fakeSys) CopyFile(src, dst string, _ os.FileMode, keep bool) error {
	return f.do(fmt.Sprintf("copy %s %s keep=%v", src, dst, keep))
}

// index returns the position of the first op with the prefix, or -1.
func (f *fakeSys) index(prefix string) int {
	for i, op := range f.ops {
		if strings.HasPrefix(op, prefix) {
			return i
		}
	}
	return -1
}

func TestSwitchRoot(t *testing.T) {
	job := &proto.Job{
		Root:   &proto.Root{Tag: proto.RootTag},
		Shares: []proto.Share{{Tag: "s0"}, {Tag: "s1", Path: "/data"}},
		Extra:  []string{"/usr/bin/strace"},
	}
	f := &fakeSys{}
	if err := earlyMounts(f); err != nil {
		t.Fatal(err)
	}
	if err := switchRoot(f, job, "/init"); err != nil {
		t.Fatalf("switchRoot: %v", err)
	}
	ro := fmt.Sprintf("%#x", unix.MS_RDONLY)
	move := fmt.Sprintf("%#x", unix.MS_MOVE)
	// Each row must appear, in this order.
	ordered := []string{
		"mount devtmpfs /dev devtmpfs",
		"mount devpts /dev/pts devpts",
		"mount tmpfs /dev/shm tmpfs",
		"mount securityfs /sys/kernel/security securityfs",
		"mount cgroup2 /sys/fs/cgroup cgroup2",
		"symlink /dev/fd -> /proc/self/fd",
		// The device itself, as a host has it (a policy names it).
		"mknod /dev/ptmx 020666 5:2",
		"mount lockstep.root /mnt/lower 9p " + ro + " trans=virtio,version=9p2000.L,cache=loose,msize=512000",
		"mount tmpfs /mnt/rw tmpfs",
		"mount overlay /mnt/root overlay 0x0 lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work",
		"mount /dev /mnt/root/dev  " + move,
		"mount /proc /mnt/root/proc  " + move,
		"mount /sys /mnt/root/sys  " + move,
		"mount tmpfs /mnt/root/run tmpfs",
		"mount tmpfs /mnt/root/tmp tmpfs",
		"mkdir /mnt/root/run/lockstep/results",
		"copy /init /mnt/root/run/lockstep/lockstep keep=false",
		"copy /extra/usr/bin/strace /mnt/root/usr/bin/strace keep=true",
		"mount s0 /mnt/root/run/lockstep/share/0 9p " + ro,
		"mount s1 /mnt/root/data 9p " + ro,
		"chdir /mnt/root",
		"mount . /  " + move,
		"chroot .",
		"chdir /",
	}
	last := -1
	for _, want := range ordered {
		i := -1
		for j := last + 1; j < len(f.ops); j++ {
			if strings.HasPrefix(f.ops[j], want) {
				i = j
				break
			}
		}
		if i < 0 {
			t.Fatalf("op %q missing or out of order; ops:\n%s", want, strings.Join(f.ops, "\n"))
		}
		last = i
	}
}

func TestSwitchRootReportsFailure(t *testing.T) {
	f := &fakeSys{failOn: "mount overlay"}
	err := switchRoot(f, &proto.Job{Root: &proto.Root{Tag: proto.RootTag}}, "/init")
	if err == nil || !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), "overlay") {
		t.Fatalf("switchRoot with a failing overlay mount = %v, want an error naming the overlay", err)
	}
	if i := f.index("chroot"); i >= 0 {
		t.Errorf("switchRoot went on to chroot after a failed mount")
	}
}

func TestEarlyMountsWithoutCgroup2(t *testing.T) {
	// A kernel given with --kernel FILE may lack cgroup v2: the job still runs.
	f := &fakeSys{failOn: "mount cgroup2"}
	if err := earlyMounts(f); err != nil {
		t.Fatalf("earlyMounts without cgroup2 = %v, want nil", err)
	}
	if f.index("symlink /dev/fd") < 0 {
		t.Error("earlyMounts stopped after the optional cgroup2 mount failed")
	}
	f = &fakeSys{failOn: "mkdir /sys/fs/cgroup"}
	if err := earlyMounts(f); err != nil {
		t.Fatalf("earlyMounts without /sys/fs/cgroup (no CONFIG_CGROUPS) = %v, want nil", err)
	}
	f = &fakeSys{failOn: "mount securityfs"}
	if err := earlyMounts(f); err == nil {
		t.Error("earlyMounts without securityfs = nil, want an error (audit and Landlock need it)")
	}
}

// devFake fails the root device's mount with ENOENT a few times, as when
// virtio-blk probes the disk after PID 1 has started.
type devFake struct {
	fakeSys
	missing int
}

func (f *devFake) Mount(src, dst, fstype string, flags uintptr, data string) error {
	if src == "/dev/vda" && f.missing > 0 {
		f.missing--
		f.ops = append(f.ops, "mount "+src+" (not yet)")
		return unix.ENOENT
	}
	return f.fakeSys.Mount(src, dst, fstype, flags, data)
}

func TestSwitchRootBlockDevice(t *testing.T) {
	job := &proto.Job{Root: &proto.Root{Device: "/dev/vda"}}
	f := &devFake{missing: 3}
	if err := switchRoot(f, job, "/init"); err != nil {
		t.Fatalf("switchRoot: %v", err)
	}
	ro := fmt.Sprintf("%#x", unix.MS_RDONLY)
	if i := f.index("mount /dev/vda /mnt/lower ext4 " + ro); i < 0 {
		t.Fatalf("no read-only ext4 mount of /dev/vda on the lower dir after it appeared: %q", f.ops)
	}
	if f.index("mount lockstep.root") >= 0 {
		t.Error("a block-device root also mounted the 9p root")
	}

	old := deviceWait
	deviceWait = 50 * time.Millisecond
	defer func() { deviceWait = old }()
	g := &devFake{missing: 1 << 30}
	err := switchRoot(g, job, "/init")
	if err == nil || !strings.Contains(err.Error(), "/dev/vda") {
		t.Errorf("switchRoot with a device that never appears = %v, want an error naming it", err)
	}
}
