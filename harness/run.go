package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
	"github.com/lockstep-sandbox/lockstep/internal/version"
)

// Options describe one guest run. The zero value of each field is
// documented; Kernel and Command are required.
type Options struct {
	// Kernel is the bzImage to boot.
	Kernel string
	// Root is the host directory exported read-only as the guest's root;
	// "" is "/". Writes land in a tmpfs overlay and never reach it.
	Root string
	// RootImage is a raw disk image with an ext4 file system (what
	// mkfs.ext4 -d makes) used as the guest's root instead of Root: attached
	// read-only as a virtio-blk disk, writes land in the tmpfs overlay. The
	// kernel needs virtio-blk and ext4 (a distribution kernel: as Modules).
	RootImage string
	// Shares are extra read-only host directories.
	Shares []Share
	// Accel is AccelAuto, AccelKVM or AccelTCG; "" is AccelAuto.
	Accel string
	// Machine is MachineMicrovm or MachineQ35; "" is MachineMicrovm.
	Machine string
	// CPU is QEMU's CPU model under KVM ("host", "host,-xsave", "EPYC",
	// …); "" is $LOCKSTEP_CPU, else the model the KVM probe found to boot
	// (Verdict.CPU). Under TCG the model is always "max".
	CPU string
	// MemMB is the guest memory in MiB; 0 is 512.
	MemMB int
	// CPUs is the number of vCPUs; 0 is 1.
	CPUs int
	// Timeout bounds the job phase (from the guest's first event to the
	// command's exit), taken as given; 0 is 10 minutes times the accel
	// factor (1 for KVM, 10 for TCG).
	Timeout time.Duration
	// BootTimeout bounds QEMU start to the guest's first event, and
	// ShutdownTimeout the command's exit to QEMU's; 0 is the accelerator's
	// BootDeadlines and ShutdownDeadlines.
	BootTimeout     time.Duration
	ShutdownTimeout time.Duration
	// Command is the argv run in the guest; Command[0] is looked up in the
	// guest's PATH.
	Command []string
	// Env is added to the command's environment (KEY=VALUE).
	Env []string
	// Dir is the command's working directory in the guest; "" is "/". A
	// directory the guest root lacks falls back to "/".
	Dir string
	// JobOptions are the command's typed options, written to
	// proto.OptionsFile before it starts; SetRole sets them.
	JobOptions json.RawMessage
	// Stdout and Stderr receive the command's output as it arrives; nil
	// discards it.
	Stdout, Stderr io.Writer
	// Input, if set, is copied to the guest's proto.InputPort (a third
	// virtio-serial port) as the job reads it: the input stream of an
	// interactive session (proto.WriteInputData). Run does not wait for a
	// Read that blocks: the caller ends Input (closes its pipe) after Run
	// returns.
	Input io.Reader
	// ResultsDir receives what the command wrote under
	// /run/lockstep/results, plus run.json; "" discards the results.
	ResultsDir string
	// ConsoleFile, if set, receives the guest's whole console log (its
	// ttyS0) when the run ends, whatever the outcome.
	ConsoleFile string
	// ForensicsDir receives forensics.txt when a deadline passes; "" is
	// ResultsDir, or CacheDir()/forensics/<job> when that is "" too.
	ForensicsDir string
	// Init is the executable that becomes the guest's /init; "" is this
	// executable (which must call guest.Main when it runs as PID 1).
	Init string
	// QEMU is the QEMU binary; "" is $LOCKSTEP_QEMU or qemu-system-x86_64.
	QEMU string
	// Verbose drops "quiet" from the kernel command line and logs the
	// QEMU command line and every guest log event at info level.
	Verbose bool
	// Modules are kernel module files loaded by PID 1 in this order before
	// anything else; a pinned kernel needs none, a distribution kernel
	// needs ResolveModules(dir, GuestModules).
	Modules []string
	// KernelArgs are appended to the kernel command line.
	KernelArgs []string
	// TestHook is passed as lockstep.hook= to make PID 1 misbehave on
	// purpose (proto.HookHangBoot, …); "" in normal use.
	TestHook string
	// Log receives progress and warnings; nil discards them.
	Log *slog.Logger
}

// Share is a host directory the guest sees read-only.
type Share struct {
	// Source is the host directory.
	Source string
	// GuestPath is where it appears; "" is /run/lockstep/share/<index>.
	GuestPath string
}

// Timings are the phases of one run.
type Timings struct {
	Accel     time.Duration `json:"accel"`
	Initramfs time.Duration `json:"initramfs"`
	// Boot is QEMU start to the guest's first event.
	Boot time.Duration `json:"boot"`
	// Job is the first event to the command's exit.
	Job time.Duration `json:"job"`
	// Shutdown is the command's exit to QEMU's.
	Shutdown time.Duration `json:"shutdown"`
	// Total is Run's whole duration.
	Total time.Duration `json:"total"`
	// QEMUCPU is QEMU's user+system CPU time: under TCG the guest's whole
	// work, and a figure a busy host inflates far less than wall time.
	QEMUCPU time.Duration `json:"qemu_cpu"`
}

// Result is what came back from one guest.
type Result struct {
	// Status is the command's exit status when everything checked out; 3
	// when the run is indeterminate; 70 when the guest could not be set up.
	Status int `json:"status"`
	// Reason explains a status of 3 or 70; "" otherwise.
	Reason string `json:"reason,omitempty"`
	// Lockstep is the version of the lockstep that ran the guest
	// (internal/version: the same binary is the guest's PID 1).
	Lockstep string `json:"lockstep"`
	// Accel is the accelerator used, and AccelReason why.
	Accel       string `json:"accel"`
	AccelReason string `json:"accel_reason"`
	// CPU is the CPU model the guest ran on (QEMU's -cpu).
	CPU         string `json:"cpu"`
	Machine     string `json:"machine"`
	CPUs        int    `json:"vcpus"`
	MemMB       int    `json:"mem_mb"`
	QEMUVersion string `json:"qemu_version"`
	// KernelRelease is what the guest's uname said.
	KernelRelease   string  `json:"kernel_release"`
	KernelSHA256    string  `json:"kernel_sha256"`
	InitramfsSHA256 string  `json:"initramfs_sha256"`
	JobID           string  `json:"job_id"`
	Timings         Timings `json:"timings"`
	// Events is the number of events received; ResultsFiles the number
	// of files unpacked into ResultsDir.
	Events uint64 `json:"events"`
	// GuestUptimeAtHello and GuestUptimeAtExit are the guest kernel's
	// uptime when PID 1 said hello and when the command exited.
	GuestUptimeAtHello time.Duration `json:"guest_uptime_at_hello"`
	GuestUptimeAtExit  time.Duration `json:"guest_uptime_at_exit"`
	ResultsFiles       int           `json:"results_files"`
	// ForensicsFile is set when a deadline passed.
	ForensicsFile string `json:"forensics_file,omitempty"`
	// OOMKills are the console's lines of the guest kernel's OOM killer
	// killing a process: why a command ended with 137 it did not ask for.
	OOMKills []string `json:"oom_kills,omitempty"`
	// Signaled is PID 1's console line when the command died by a signal
	// (proto.SignaledPrefix and what follows): the command's CPU time, the
	// OOM-kill count and the memory left at that moment.
	Signaled string `json:"signaled,omitempty"`
	// QEMUCommand is the pasteable QEMU command line.
	QEMUCommand string `json:"qemu_command"`
	// ConsoleTail is the console's last lines, '\r' stripped.
	ConsoleTail []string `json:"-"`
}

// Errors that come with a Result.
var (
	// ErrIndeterminate: the guest did not report trustworthily (status 3).
	ErrIndeterminate = errors.New("indeterminate")
	// ErrGuestSetup: the guest could not be set up (status 70).
	ErrGuestSetup = errors.New("guest setup failed")
)

const (
	defaultMemMB      = 512
	defaultJobTimeout = 10 * time.Minute
	tcgFactor         = 10
	consoleTailLines  = 100
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

// BootDeadlines are the default deadlines of the boot phase (QEMU's start
// to the guest's first event) per accelerator, about three times the
// slowest boot measured (docs/harness.md, "Deadlines and hangs"). KVM: the
// pin under KVM nested in a TCG guest (make test-kvm), 3.4–8.1 s on a quiet
// host and up to 30.7 s with the host's two cores shared by other guests
// and builds (load 10); on a hardware KVM it boots in well under a second.
// TCG: Debian's kernel loading 18 modules on q35, 6.7–13.9 s (the nested
// test's outer guest); the pin on microvm 1–3 s. The KVM probe's boot has
// the same deadline: a guest the probe gave up on would not have booted in
// a run either.
// Beside two CPU hogs on the two cores (make stress's last round) the
// nested KVM boots took up to 56.9 s, 1.6 times under the deadline.
var BootDeadlines = map[string]time.Duration{AccelKVM: 90 * time.Second, AccelTCG: 60 * time.Second}

// ShutdownDeadlines are the default deadlines of the shutdown phase (the
// command's exit to QEMU's) per accelerator. KVM: the nested boots of make
// test-kvm shut down in 0.3–1.8 s, 3.7 s beside two CPU hogs (the 5 s it
// had left 1.35 times that); TCG: 5 s times tcgFactor, as before.
var ShutdownDeadlines = map[string]time.Duration{AccelKVM: 15 * time.Second, AccelTCG: 50 * time.Second}

// AccelFactor is how much slower a guest runs under accel than under KVM;
// default deadlines are multiplied by it (as syzkaller does).
func AccelFactor(accel string) time.Duration {
	if accel == AccelTCG {
		return tcgFactor
	}
	return 1
}

func (o Options) validate() error {
	var errs []error
	if o.Kernel == "" {
		errs = append(errs, errors.New("no kernel: want a bzImage path"))
	} else if _, err := os.Stat(o.Kernel); err != nil {
		errs = append(errs, fmt.Errorf("kernel: %w", err))
	}
	if len(o.Command) == 0 {
		errs = append(errs, errors.New("no command to run in the guest"))
	}
	if o.Root != "" {
		if fi, err := os.Stat(o.Root); err != nil || !fi.IsDir() {
			errs = append(errs, fmt.Errorf("root %s: want an existing directory", o.Root))
		}
	}
	if o.RootImage != "" {
		if o.Root != "" {
			errs = append(errs, fmt.Errorf("root %s and root image %s: want one of them", o.Root, o.RootImage))
		}
		if fi, err := os.Stat(o.RootImage); err != nil || !fi.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("root image %s: want an existing disk image file", o.RootImage))
		}
	}
	for _, s := range o.Shares {
		if fi, err := os.Stat(s.Source); err != nil || !fi.IsDir() {
			errs = append(errs, fmt.Errorf("share %s: want an existing directory", s.Source))
		}
		if s.GuestPath != "" && !filepath.IsAbs(s.GuestPath) {
			errs = append(errs, fmt.Errorf("share %s: guest path %q: want an absolute path", s.Source, s.GuestPath))
		}
	}
	switch o.Accel {
	case "", AccelAuto, AccelKVM, AccelTCG:
	default:
		errs = append(errs, fmt.Errorf("accel %q: want auto, kvm or tcg", o.Accel))
	}
	if o.MemMB < 0 || o.CPUs < 0 || o.Timeout < 0 {
		errs = append(errs, errors.New("memory, vCPUs and timeout must not be negative"))
	}
	return errors.Join(errs...)
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

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// consoleLines returns the last n lines of a console capture, '\r' and
// trailing blank lines removed.
func consoleLines(b []byte, n int) []string {
	s := strings.ReplaceAll(string(b), "\r", "")
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
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

// Run boots one throwaway guest, runs o.Command in it and returns what came
// back. The returned error is nil when the command's status is
// trustworthy (whatever its value); with a Result it wraps ErrIndeterminate
// (status 3), ErrGuestSetup (status 70) or the context's error; without one
// nothing was booted (bad options, no QEMU, KVM asked for but unusable).
//
// No QEMU process and no temporary directory outlives Run, on any path.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.setDefaults()
	qv, err := QEMUVersion(o.QEMU)
	if err != nil {
		return nil, fmt.Errorf("%w: %w (install qemu-system-x86, or name the binary in LOCKSTEP_QEMU)", ErrNoQEMU, err)
	}
	accel, cpu, accelReason, err := resolveAccel(ctx, &o)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Status: proto.StatusIndeterminate, Accel: accel, AccelReason: accelReason, CPU: cpu, Machine: o.Machine,
		CPUs: o.CPUs, MemMB: o.MemMB, QEMUVersion: qv, Lockstep: version.String(), JobID: newID(), KernelSHA256: fileSHA256(o.Kernel),
	}
	res.Timings.Accel = time.Since(start)
	defer func() { res.Timings.Total = time.Since(start) }()

	dir, err := os.MkdirTemp("", "lockstep-guest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	job, shares, disks := guestJob(&o, res.JobID, accel)
	initrd := filepath.Join(dir, "initramfs")
	if err := buildInitramfs(ctx, &o, job, initrd, res); err != nil {
		return nil, err
	}
	chs, err := listenChannels(&o, dir)
	if err != nil {
		return nil, err
	}
	defer chs.close()
	cfg := QEMUConfig{
		Binary: o.QEMU, Name: "lockstep-" + res.JobID, Machine: o.Machine, Accel: accel, CPU: cpu,
		MemMB: o.MemMB, CPUs: o.CPUs, Kernel: o.Kernel, Initramfs: initrd,
		Append:     kernelCmdline(res.JobID, o.Verbose, o.TestHook, append(accelKernelArgs(accel), o.KernelArgs...)...),
		ConsoleLog: filepath.Join(dir, "console.log"), QMPSocket: filepath.Join(dir, "qmp.sock"),
		Shares: shares, Disks: disks,
		Ports: chs.ports,
		RNG:   true,
	}
	argv, err := qemuArgv(cfg, &o, res)
	if err != nil {
		return nil, err
	}

	g := &guestRun{o: &o, res: res, log: o.Log, argv: argv, consolePath: cfg.ConsoleLog, qmpPath: cfg.QMPSocket, evL: chs.evL, resL: chs.resL,
		inL: chs.inL, deadlines: o.deadlines(accel)}
	err = g.boot(ctx)
	res.Timings.Total = time.Since(start)
	saveOutputs(&o, res, cfg.ConsoleLog)
	return res, err
}

// saveOutputs keeps what a run leaves for its caller: run.json and the
// console.
func saveOutputs(o *Options, res *Result, console string) {
	saveRunJSON(o, res)
	saveConsole(o, console)
}

// saveConsole copies the console log to o.ConsoleFile, if one is asked
// for; a failure is only warned about, as the run's outcome stands without
// it.
func saveConsole(o *Options, console string) {
	if o.ConsoleFile == "" {
		return
	}
	b, err := os.ReadFile(console)
	if err == nil {
		err = safefile.WriteFile(o.ConsoleFile, b, 0o644)
	}
	if err != nil {
		o.Log.Warn("cannot keep the console log", "file", o.ConsoleFile, "err", err)
	}
}

// saveRunJSON writes run.json into o.ResultsDir, if there is one; a failure
// is only warned about, as the run's outcome stands without it.
func saveRunJSON(o *Options, res *Result) {
	if o.ResultsDir == "" {
		return
	}
	if err := writeRunJSON(o.ResultsDir, res); err != nil {
		o.Log.Warn("cannot write run.json", "err", err)
	}
}

// setDefaults fills in the zero fields that stand for a default.
func (o *Options) setDefaults() {
	if o.Accel == "" {
		o.Accel = AccelAuto
	}
	if o.MemMB == 0 {
		o.MemMB = defaultMemMB
	}
	if o.CPUs == 0 {
		o.CPUs = 1
	}
	if o.Machine == "" {
		o.Machine = MachineMicrovm
	}
	if o.Root == "" && o.RootImage == "" {
		o.Root = "/"
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// deadlines are o's phase deadlines, a zero one the default for accel.
func (o Options) deadlines(accel string) deadlines {
	factor := AccelFactor(accel)
	d := deadlines{boot: o.BootTimeout, job: o.Timeout, shutdown: o.ShutdownTimeout}
	if d.boot == 0 {
		d.boot = BootDeadlines[accel]
	}
	if d.job == 0 {
		d.job = defaultJobTimeout * factor
	}
	if d.shutdown == 0 {
		d.shutdown = ShutdownDeadlines[accel]
	}
	return d
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

// guestRun is one booted guest's state while Run waits for it.
type guestRun struct {
	o   *Options
	res *Result
	log *slog.Logger

	argv                 []string // QEMU's command line, argv[0] the binary
	consolePath, qmpPath string
	evL, resL            net.Listener // the events and results channels
	inL                  net.Listener // the input channel, nil without Options.Input
	deadlines            deadlines

	mu         sync.Mutex
	exitStatus *int
	guestError string
}

// deadlines bound the three phases of a guest run.
type deadlines struct {
	boot, job, shutdown time.Duration
}

// qemuProcess is the running QEMU: exited closes when it has been waited
// for, and waitErr is Wait's error, read only after exited.
type qemuProcess struct {
	cmd     *exec.Cmd
	out     *limitedBuffer // the first 64 KiB of QEMU's own output
	started time.Time
	exited  chan struct{}
	waitErr error
}

// guestChannels is what the events and results readers deliver. hello and
// jobDone close as those events arrive; the other fields belong to the
// readers until readers.Wait returns.
type guestChannels struct {
	hello, jobDone chan struct{}
	readers        sync.WaitGroup

	evErr   error
	evDone  *proto.Done
	payload []byte
	sum     string
	resErr  error
}

// waitState is where the wait for the guest ended.
type waitState struct {
	phase      string // boot, job or shutdown
	limit      time.Duration
	phaseStart time.Time
	deadline   string // why a deadline passed; "" if none did
	// interrupted is set when ctx ended. stopped is set once lockstep
	// itself ends QEMU (a deadline, an interrupt); an exit before that is
	// QEMU's own, or an outside kill's.
	interrupted, stopped bool
}

// boot starts QEMU, follows the guest through its phases and decides the
// run from what arrived.
func (g *guestRun) boot(ctx context.Context) error {
	// QEMU must not die with ctx before forensics or quit: it gets its own
	// context, cancelled on every path out of here.
	qctx, qcancel := context.WithCancel(context.Background())
	defer qcancel()
	q, err := g.startQEMU(qctx)
	if err != nil {
		return err
	}
	defer func() {
		qcancel() // kills the process group if it still runs
		<-q.exited
		if ps := q.cmd.ProcessState; ps != nil {
			g.res.Timings.QEMUCPU = ps.UserTime() + ps.SystemTime()
		}
	}()

	ch := g.startReaders(q.exited)
	if g.inL != nil {
		go g.writeInput(q.exited)
	}
	w := g.waitGuest(ctx, ch, q)
	// Give QEMU a moment to leave after quit, then kill its group.
	select {
	case <-q.exited:
	case <-time.After(2 * time.Second):
	}
	qcancel()
	<-q.exited
	if w.phase == "shutdown" && g.res.Timings.Shutdown == 0 {
		g.res.Timings.Shutdown = time.Since(w.phaseStart)
	}
	g.evL.Close()
	g.resL.Close()
	stuck := !ch.finish(5 * time.Second)
	return g.conclude(ctx, ch, w, q, stuck)
}

// startQEMU starts QEMU in its own process group, killed when qctx ends.
func (g *guestRun) startQEMU(qctx context.Context) (*qemuProcess, error) {
	q := &qemuProcess{out: &limitedBuffer{b: new(bytes.Buffer), max: 64 << 10}, exited: make(chan struct{})}
	q.cmd = qemuCommand(qctx, g.argv[0], g.argv[1:], q.out)
	q.started = time.Now()
	if err := q.cmd.Start(); err != nil {
		g.res.Reason = fmt.Sprintf("start QEMU: %v", err)
		return nil, fmt.Errorf("%w: %s", ErrIndeterminate, g.res.Reason)
	}
	go func() { q.waitErr = q.cmd.Wait(); close(q.exited) }()
	return q, nil
}

// startReaders starts reading the events and the results channels, each
// giving up if QEMU exits before the guest connects.
func (g *guestRun) startReaders(exited <-chan struct{}) *guestChannels {
	ch := &guestChannels{hello: make(chan struct{}), jobDone: make(chan struct{})}
	ch.readers.Add(2)
	go func() {
		defer ch.readers.Done()
		g.readEvents(ch, exited)
	}()
	go func() {
		defer ch.readers.Done()
		g.readResults(ch, exited)
	}()
	return ch
}

// readEvents reads the events channel to its end.
func (g *guestRun) readEvents(ch *guestChannels, exited <-chan struct{}) {
	conn, err := acceptUntil(g.evL, exited)
	if err != nil {
		ch.evErr = fmt.Errorf("events channel: %w", err)
		return
	}
	defer conn.Close()
	er := proto.NewEventReader(conn)
	var helloOnce, doneOnce sync.Once
	hello := func() { helloOnce.Do(func() { close(ch.hello) }) }
	jobDone := func() { doneOnce.Do(func() { close(ch.jobDone) }) }
	for {
		e, err := er.Next()
		if err == io.EOF {
			ch.evDone = er.Done()
			return
		}
		if e.Type == proto.EventDone || errors.Is(err, proto.ErrBadCounts) {
			// PID 1 reboots once it has this, and not before: every
			// event up to done has been read by now, and a done whose
			// counts differ gains nothing from a wait.
			_, _ = conn.Write([]byte{proto.EventsAck})
		}
		if err != nil {
			ch.evErr = err
			return
		}
		g.res.Events++
		g.handleEvent(e, hello, jobDone)
	}
}

// handleEvent records one event; hello and jobDone signal those moments.
func (g *guestRun) handleEvent(e proto.Event, hello, jobDone func()) {
	res, o := g.res, g.o
	switch e.Type {
	case proto.EventHello:
		res.KernelRelease = e.Msg
		res.GuestUptimeAtHello = time.Duration(e.UptimeMS) * time.Millisecond
		hello()
	case proto.EventStdout:
		o.Stdout.Write(e.Data)
	case proto.EventStderr:
		o.Stderr.Write(e.Data)
	case proto.EventLog:
		if o.Verbose {
			g.log.Info("guest: "+e.Msg, "uptime_ms", e.UptimeMS)
		} else {
			g.log.Debug("guest: "+e.Msg, "uptime_ms", e.UptimeMS)
		}
	case proto.EventError:
		g.mu.Lock()
		g.guestError = e.Msg
		g.mu.Unlock()
		jobDone()
	case proto.EventExit:
		res.GuestUptimeAtExit = time.Duration(e.UptimeMS) * time.Millisecond
		g.mu.Lock()
		g.exitStatus = e.Status
		g.mu.Unlock()
		jobDone()
	case proto.EventDone:
		jobDone()
	}
}

// readResults reads the results frame.
func (g *guestRun) readResults(ch *guestChannels, exited <-chan struct{}) {
	conn, err := acceptUntil(g.resL, exited)
	if err != nil {
		ch.resErr = fmt.Errorf("results channel: %w", err)
		return
	}
	defer conn.Close()
	ch.payload, ch.sum, ch.resErr = proto.ReadFrame(conn, guest.MaxResults)
	// PID 1 reboots once it has this, and not before: the frame's tail is
	// safe here by now. (A guest gone already makes the write fail.)
	_, _ = conn.Write([]byte{proto.ResultsAck})
}

// writeInput copies Options.Input to the input channel until either
// ends; QEMU holds back what the guest has not read yet.
func (g *guestRun) writeInput(exited <-chan struct{}) {
	conn, err := acceptUntil(g.inL, exited)
	if err != nil {
		g.log.Warn("the input channel did not connect", "err", err)
		return
	}
	defer conn.Close()
	go func() { <-exited; conn.Close() }()
	if _, err := io.Copy(conn, g.o.Input); err != nil {
		g.log.Debug("the input channel ended", "err", err)
	}
}

// finish waits up to timeout for both readers and reports whether they
// finished. QEMU is gone by then, so its sockets are closed; they cannot
// fail to finish unless a writer blocks. Until they do they still own
// their fields, so nothing they write may be read.
func (ch *guestChannels) finish(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { ch.readers.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// waitGuest follows the guest through the boot, job and shutdown phases,
// each under its deadline, until QEMU exits, a deadline passes (forensics
// saved, QEMU asked to quit) or ctx ends (QEMU asked to quit).
func (g *guestRun) waitGuest(ctx context.Context, ch *guestChannels, q *qemuProcess) *waitState {
	res := g.res
	w := &waitState{phase: "boot", limit: g.deadlines.boot, phaseStart: q.started}
	timer := time.NewTimer(w.limit)
	defer timer.Stop()
	next := func(phase string, limit time.Duration) {
		w.phase, w.limit, w.phaseStart = phase, limit, time.Now()
		timer.Reset(limit)
	}
	hello, jobDone := ch.hello, ch.jobDone // nil once seen
	for {
		select {
		case <-q.exited:
			return w
		case <-hello:
			hello = nil
			res.Timings.Boot = time.Since(q.started)
			next("job", g.deadlines.job)
			g.log.Info("guest up; running the command", "boot", res.Timings.Boot.Round(time.Millisecond), "kernel", res.KernelRelease)
		case <-jobDone:
			jobDone = nil
			if hello != nil { // done without hello: a setup failure
				hello = nil
				res.Timings.Boot = time.Since(q.started)
			} else {
				res.Timings.Job = time.Since(w.phaseStart)
			}
			next("shutdown", g.deadlines.shutdown)
		case <-timer.C:
			w.deadline = fmt.Sprintf("the %s phase passed its %v deadline (accel %s)", w.phase, w.limit, res.Accel)
			g.log.Warn("guest deadline passed; saving forensics", "phase", w.phase, "deadline", w.limit)
			w.stopped = true
			g.endHung(g.qmpPath, g.consolePath, g.argv, w.deadline)
			return w
		case <-ctx.Done():
			w.interrupted, w.stopped = true, true
			g.quit(g.qmpPath, time.Second)
			return w
		}
	}
}

// conclude reads the console and decides the run once QEMU is gone: the
// command's status, a setup failure or an indeterminate run; it unpacks
// the results of a trustworthy one.
func (g *guestRun) conclude(ctx context.Context, ch *guestChannels, w *waitState, q *qemuProcess, stuck bool) error {
	res, o := g.res, g.o
	console, _ := os.ReadFile(g.consolePath)
	// Split once; the tail, the OOM kills and PID 1's witness all read it.
	all := consoleLines(console, len(console)+1)
	res.ConsoleTail = all[max(0, len(all)-consoleTailLines):]
	res.OOMKills = oomKills(all)
	res.Signaled = signaledLine(all)
	if res.Signaled != "" && len(res.OOMKills) == 0 {
		g.log.Warn("the command died by a signal no OOM killer sent", "guest", res.Signaled)
	}
	for _, l := range res.OOMKills {
		g.log.Warn("the guest ran out of memory and its kernel killed a process", "mem_mb", o.MemMB, "console", l)
	}
	if stuck {
		res.Reason = "channel readers did not finish after QEMU exited"
		return fmt.Errorf("%w: %s", ErrIndeterminate, res.Reason)
	}
	if w.interrupted {
		res.Reason = "interrupted: " + ctx.Err().Error()
		return fmt.Errorf("%w: interrupted: %w", ErrIndeterminate, ctx.Err())
	}
	g.mu.Lock()
	guestError := g.guestError
	g.mu.Unlock()
	v := judge(outcome{
		console: console, deadline: w.deadline, events: ch.evErr, done: ch.evDone,
		results: ch.resErr, resultsSHA256: ch.sum, resultsBytes: int64(len(ch.payload)), guestError: guestError,
	})
	if v.setup {
		res.Status, res.Reason = proto.StatusSetupFailed, v.reason
		return fmt.Errorf("%w: %s", ErrGuestSetup, res.Reason)
	}
	problems := v.problems
	if len(problems) == 0 && o.ResultsDir != "" && len(ch.payload) > 0 {
		n, err := guest.UnpackResults(ch.payload, o.ResultsDir)
		res.ResultsFiles = n
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return g.indeterminate(problems, q, w.stopped)
	}
	res.Status = v.status
	return nil
}

// indeterminate sets status 3 with problems as the reason, adding how QEMU
// ended when it ended on its own or was killed from outside (the host's OOM
// killer, a person), which leaves no message of its own.
func (g *guestRun) indeterminate(problems []string, q *qemuProcess, stopped bool) error {
	res := g.res
	if q.waitErr != nil && !stopped {
		problems = append(problems, "QEMU ended before lockstep stopped it: "+q.waitErr.Error())
	}
	if q.waitErr != nil && !strings.Contains(q.out.String(), "terminating on signal") {
		if msg := strings.TrimSpace(q.out.String()); msg != "" {
			problems = append(problems, "QEMU said: "+lastLine([]byte(msg)))
		}
	}
	res.Status = proto.StatusIndeterminate
	res.Reason = strings.Join(problems, "; ")
	g.log.Debug("indeterminate run", "qemu", res.QEMUCommand)
	return fmt.Errorf("%w: %s", ErrIndeterminate, res.Reason)
}

// oomKillMarks are in the line the kernel's OOM killer prints (at
// KERN_ERR, so even a quiet console shows it) for each process it kills:
// "Out of memory: Killed process …", or "Memory cgroup out of memory:
// Killed process …" when a cgroup's limit was reached.
var oomKillMarks = []string{"Out of memory: Killed process ", "out of memory: Killed process "}

// maxOOMKills bounds the OOM-killer lines kept from one console.
const maxOOMKills = 10

// oomKills returns the first OOM-killer lines of the console's lines
// (consoleLines).
func oomKills(lines []string) []string {
	var out []string
	for _, l := range lines {
		if len(out) == maxOOMKills {
			break
		}
		for _, m := range oomKillMarks {
			if strings.Contains(l, m) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	return out
}

// signaledLine returns PID 1's line about a command that died by a signal,
// without its prefix, or "", from the console's lines (consoleLines).
func signaledLine(lines []string) string {
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, proto.SignaledPrefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// outcome is everything the channels delivered once QEMU is gone.
type outcome struct {
	console  []byte
	deadline string      // why a deadline passed; "" if none did
	events   error       // the event stream's error (gap, missing done, …)
	done     *proto.Done // the done event, nil without one
	results  error       // the results frame's error
	// resultsSHA256 and resultsBytes describe the frame received.
	resultsSHA256 string
	resultsBytes  int64
	guestError    string // the last error event's message
}

// verdict is what an outcome means: a guest setup failure (status 70 and
// its reason), or the command's status when problems is empty, or
// indeterminate because of problems.
type verdict struct {
	setup    bool
	reason   string
	status   int
	problems []string
}

// judge decides a run from what arrived: the status is the command's only
// when the console line, the done event and the results frame agree and
// arrived whole.
func judge(o outcome) verdict {
	status, ok := proto.ParseStatus(o.console)
	if ok && status == proto.StatusSetupFailed {
		reason := proto.ParseSetupError(o.console)
		if reason == "" {
			reason = o.guestError
		}
		if reason == "" {
			reason = "the guest reported status 70 without a reason"
		}
		return verdict{setup: true, reason: reason, status: status}
	}
	var problems []string
	if o.deadline != "" {
		problems = append(problems, o.deadline)
	}
	if !ok {
		problems = append(problems, "no LOCKSTEP-STATUS line on the console")
	}
	if o.events != nil {
		problems = append(problems, o.events.Error())
	} else if o.done == nil {
		problems = append(problems, "no done event")
	}
	// Without a done event a frame that was cut short is still worth
	// naming; one that never started (EOF before its header) is not.
	if o.done == nil && o.results != nil && !errors.Is(o.results, io.EOF) {
		problems = append(problems, o.results.Error())
	}
	if o.done != nil {
		if ok && o.done.Status != status {
			problems = append(problems, fmt.Sprintf("console status %d differs from the done event's %d", status, o.done.Status))
		}
		switch {
		case o.results != nil:
			problems = append(problems, o.results.Error())
		case o.done.ResultsSHA256 != o.resultsSHA256 || o.done.ResultsBytes != o.resultsBytes:
			problems = append(problems, fmt.Sprintf("results frame sha256 %s (%d bytes) differs from the done event's %s (%d bytes)",
				o.resultsSHA256, o.resultsBytes, o.done.ResultsSHA256, o.done.ResultsBytes))
		}
	}
	return verdict{status: status, problems: problems}
}

// acceptUntil accepts one connection, giving up when QEMU exits.
func acceptUntil(l net.Listener, exited <-chan struct{}) (net.Conn, error) {
	type r struct {
		c   net.Conn
		err error
	}
	ch := make(chan r, 1)
	go func() { c, err := l.Accept(); ch <- r{c, err} }()
	select {
	case x := <-ch:
		return x.c, x.err
	case <-exited:
		l.Close()
		x := <-ch
		if x.c != nil {
			return x.c, nil
		}
		return nil, errors.New("QEMU exited before connecting")
	}
}

// endHung saves forensics, then asks QEMU to quit; the caller kills it.
func (g *guestRun) endHung(qmpPath, consolePath string, argv []string, reason string) {
	m, err := dialQMP(qmpPath, qmpTimeout)
	if err != nil {
		g.log.Warn("no QMP for forensics", "err", err)
		m = nil
	}
	console, _ := os.ReadFile(consolePath)
	text := forensics(m, reason, argv, consoleLines(console, consoleTailLines))
	dir := g.o.ForensicsDir
	if dir == "" {
		dir = g.o.ResultsDir
	}
	if dir == "" {
		dir = filepath.Join(CacheDir(), "forensics", g.res.JobID)
	}
	path := filepath.Join(dir, "forensics.txt")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err := safefile.WriteFile(path, []byte(text), 0o644); err == nil {
			g.res.ForensicsFile = path
		}
	}
	if g.res.ForensicsFile == "" {
		g.log.Warn("cannot save forensics", "dir", dir)
	}
	if m != nil {
		m.quit()
		m.close()
	}
}

// quit asks QEMU to quit through QMP, within timeout.
func (g *guestRun) quit(qmpPath string, timeout time.Duration) {
	m, err := dialQMP(qmpPath, timeout)
	if err != nil {
		return
	}
	m.quit()
	m.close()
}

// RunJSONSchema is the schema version of run.json.
const RunJSONSchema = 1

func writeRunJSON(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	doc := struct {
		Schema int `json:"schema"`
		*Result
	}{RunJSONSchema, res}
	b, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return err
	}
	// Atomic: a full disk leaves no run.json rather than a truncated one.
	return safefile.WriteFile(filepath.Join(dir, "run.json"), append(b, '\n'), 0o644)
}
