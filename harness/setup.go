package harness

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
)

// initramfsCompressionDefault is the cached initramfs base's compression:
// none, because the kernel unpacks it at every boot and under TCG decoding
// zstd costs more CPU than copying the uncompressed archive (measured:
// QEMU CPU time of `lockstep boot -- true`, four alternating pairs, zstd
// 2.25–3.13 s, mean 2.59; none 1.94–2.58 s, mean 2.17).
const initramfsCompressionDefault = guest.CompressNone

// initramfsCompression is $LOCKSTEP_INITRAMFS_COMPRESSION (gzip, zstd or
// none) or the default.
func initramfsCompression() string {
	if c := os.Getenv("LOCKSTEP_INITRAMFS_COMPRESSION"); c != "" {
		return c
	}
	return initramfsCompressionDefault
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func qemuBinary(b string) string {
	if b != "" {
		return b
	}
	return defaultQEMU()
}

// kernelCmdline is the guest's kernel command line (docs/harness.md).
func kernelCmdline(id string, verbose bool, hook string, extra ...string) string {
	// no_timer_check: under TCG on a loaded host the IO-APIC timer check
	// misses its ticks and panics ("IO-APIC + timer doesn't work!").
	args := []string{"console=ttyS0", "panic=-1", "reboot=t", "no_timer_check", "lsm=landlock", "audit=1", "audit_backlog_limit=8192",
		proto.CmdlineJob + "=" + id}
	if !verbose {
		args = append(args, "quiet")
	}
	if hook != "" {
		args = append(args, proto.CmdlineHook+"="+hook)
	}
	return strings.Join(append(args, extra...), " ")
}

// accelKernelArgs are kernel arguments for one accelerator. Under TCG the
// local APIC timer fails the kernel's verification anyway ("APIC timer
// disabled due to verification failure") after a calibration that costs a
// fifth of the boot: noapictimer skips both and the guest ends with the
// same clock event source (measured: QEMU CPU time of a probe boot, four
// alternating pairs, 1.64–2.20 s without, 1.37–1.92 s with).
func accelKernelArgs(accel string) []string {
	if accel == AccelTCG {
		return []string{"noapictimer"}
	}
	return nil
}

// qemuCommand starts QEMU in its own process group (so a terminal's ^C
// reaches lockstep, which then ends QEMU in order), killed with lockstep if
// lockstep dies, and killed with its group when ctx ends.
func qemuCommand(ctx context.Context, bin string, args []string, out io.Writer) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = nil
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func hasStrace(root string) bool {
	for _, p := range []string{"usr/bin/strace", "bin/strace", "usr/local/bin/strace"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			return true
		}
	}
	return false
}

func fileSHA256(path string) string {
	f, err := safefile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}

// guestJob is the job PID 1 runs, and the 9P shares and disks QEMU gives
// the guest for its root and o.Shares.
func guestJob(o *Options, id, accel string) (job *proto.Job, shares []Share9P, disks []string) {
	// The accelerator is resolved only now; the job learns it from its
	// environment (its time limits depend on it).
	env := append(slices.Clip(o.Env), proto.EnvAccel+"="+accel)
	job = &proto.Job{
		Schema: proto.SchemaVersion, ID: id, Command: o.Command, Env: env, Dir: o.Dir, Options: o.JobOptions,
		Root: &proto.Root{Tag: proto.RootTag}, Verbose: o.Verbose,
	}
	if o.RootImage != "" {
		job.Root = &proto.Root{Device: "/dev/vda", FSType: "ext4"}
		disks = append(disks, o.RootImage)
	} else {
		shares = append(shares, Share9P{Tag: proto.RootTag, Path: o.Root})
	}
	for i, s := range o.Shares {
		tag := fmt.Sprintf("lockstep.share%d", i)
		job.Shares = append(job.Shares, proto.Share{Tag: tag, Path: s.GuestPath})
		shares = append(shares, Share9P{Tag: tag, Path: s.Source})
	}
	return job, shares, disks
}

// guestStrace is the host's strace to carry into the guest, "" when the
// guest's root has its own or the host has none. An image root is not
// looked into: strace rides along and is copied in only where the root
// lacks it.
func guestStrace(o *Options) string {
	if o.RootImage == "" && hasStrace(o.Root) {
		return ""
	}
	p, err := exec.LookPath("strace")
	if err != nil {
		o.Log.Warn("the guest root has no strace and neither has this host; the guest will run without it")
		return ""
	}
	return p
}

// buildInitramfs writes the guest's initramfs for job to output, noting
// its hash and the time it took in res.
func buildInitramfs(ctx context.Context, o *Options, job *proto.Job, output string, res *Result) error {
	strace := guestStrace(o)
	t0 := time.Now()
	sum, err := guest.Initramfs(ctx, guest.InitramfsOptions{
		Init: o.Init, Job: job, Output: output, Strace: strace, Compression: initramfsCompression(), Modules: o.Modules,
		CacheDir: filepath.Join(CacheDir(), "initramfs"), Log: o.Log,
	})
	res.InitramfsSHA256 = sum
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// No guest can start without its initramfs (a dynamically linked
		// init, a module that is not there): status 70, not 3.
		return fmt.Errorf("%w: %w", ErrGuestSetup, err)
	}
	res.Timings.Initramfs = time.Since(t0)
	return nil
}

// channels are the listening host ends of the guest's virtio-serial
// ports: events, results and, with Options.Input, input.
type channels struct {
	evL, resL, inL net.Listener
	ports          []SerialPort
}

func (c *channels) close() {
	for _, l := range []net.Listener{c.evL, c.resL, c.inL} {
		if l != nil {
			l.Close()
		}
	}
}

// listenChannels listens on the events and the results sockets in dir,
// and on the input socket when o.Input is set.
func listenChannels(o *Options, dir string) (*channels, error) {
	c := &channels{}
	socks := []struct {
		l    *net.Listener
		name string
	}{{&c.evL, proto.EventsPort}, {&c.resL, proto.ResultsPort}, {&c.inL, proto.InputPort}}
	if o.Input == nil {
		socks = socks[:2]
	}
	for _, s := range socks {
		path := filepath.Join(dir, strings.TrimPrefix(s.name, "lockstep.")+".sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("%s socket: %w", s.name, err)
		}
		*s.l = l
		c.ports = append(c.ports, SerialPort{Name: s.name, Socket: path})
	}
	return c, nil
}

// qemuArgv is QEMU's command line for cfg, logged and noted in res as a
// command to paste.
func qemuArgv(cfg QEMUConfig, o *Options, res *Result) ([]string, error) {
	args, err := cfg.Args()
	if err != nil {
		return nil, err
	}
	argv := append([]string{qemuBinary(o.QEMU)}, args...)
	res.QEMUCommand = shellquote.Join(argv)
	o.Log.Info("booting the guest", "accel", cfg.Accel, "machine", o.Machine, "waiting_for", "hello")
	if o.Verbose {
		o.Log.Info("qemu command line", "qemu", res.QEMUCommand)
	} else {
		o.Log.Debug("qemu command line", "qemu", res.QEMUCommand)
	}
	return argv, nil
}
