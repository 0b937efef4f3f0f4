package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
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
	// ForensicsDir receives ForensicsFile when a deadline passes; "" is
	// ResultsDir, or CacheDir()/forensics/<job> when that is "" too. A
	// caller whose ResultsDir is a temporary directory sets it (see
	// TempForensicsDir), or the forensics go with the directory.
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

// deadlines bound the three phases of a guest run.
type deadlines struct {
	boot, job, shutdown time.Duration
}

// ForensicsFile is the name of the file a passed deadline leaves in
// ForensicsDir: the run state, every vCPU's registers and the console's
// last lines.
const ForensicsFile = "forensics.txt"

// TempForensicsDir is where a run whose ResultsDir is tmp, a directory
// under the system's temporary directory, keeps its forensics: under the
// cache, named after tmp's path (unique while tmp exists), so they
// outlive it.
func TempForensicsDir(tmp string) string {
	rel := strings.TrimPrefix(filepath.Clean(tmp), filepath.Clean(os.TempDir())+string(filepath.Separator))
	return filepath.Join(CacheDir(), "forensics", strings.ReplaceAll(rel, string(filepath.Separator), "_"))
}
