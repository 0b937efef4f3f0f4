package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
	"golang.org/x/sys/unix"
)

// ErrKVMUnusable is returned when --accel kvm was asked for and KVM cannot
// run a guest here.
var ErrKVMUnusable = errors.New("kvm unusable")

// ErrNoQEMU is returned when the QEMU binary cannot be run (not installed,
// or not QEMU): no guest was started.
var ErrNoQEMU = errors.New("no usable QEMU")

// Verdict is what the accel probe learnt about KVM on this host. It is
// cached per (host kernel release, QEMU version).
type Verdict struct {
	Schema      int    `json:"schema"`
	HostKernel  string `json:"host_kernel"`
	QEMUVersion string `json:"qemu_version"`
	// KVMUsable is true when a guest booted under KVM and reported in time.
	KVMUsable bool `json:"kvm_usable"`
	// Reason says why KVM is unusable ("" when usable).
	Reason string `json:"reason,omitempty"`
	// CPU is the CPU model (QEMU's -cpu) the probe guest booted with under
	// KVM: the first of KVMCPUModels that did.
	CPU string `json:"cpu,omitempty"`
	// CPUReason says why the models before CPU failed ("" when the first
	// booted).
	CPUReason string `json:"cpu_reason,omitempty"`
	// BootMS is the probe guest's boot-to-exit time under KVM.
	BootMS   int64     `json:"boot_ms,omitempty"`
	ProbedAt time.Time `json:"probed_at"`
}

// verdictSchema is Verdict's schema; a cached verdict of another (one
// without the CPU model) is probed anew.
const verdictSchema = 2

// KVMCPUModels are the CPU models the KVM probe tries, in order; the first
// whose guest reports is the one every KVM guest gets (Verdict.CPU).
// "host" passes the host CPU through. Where a guest on it does not boot
// although KVM runs guests, "host,-xsave" is the host's CPU without XSAVE:
// under an outer QEMU's TCG (the nested test, docs/harness.md) the pin's
// kernel on "host" fails at its first user process (devtmpfs: unable to
// create devtmpfs -1, Failed to execute /init) and boots with XSAVE
// taken away; qemu64, QEMU's baseline model, is the last resort.
var KVMCPUModels = []string{"host", "host,-xsave", "qemu64"}

// tcgCPU is the CPU model under TCG: every feature TCG emulates, SVM with
// nested paging among them.
const tcgCPU = "max"

// CPUEnv names the variable that sets the CPU model under KVM for every
// verb, as Options.CPU (boot's --cpu) does for one run.
const CPUEnv = "LOCKSTEP_CPU"

// CacheDir is lockstep's cache: $XDG_CACHE_HOME/lockstep (default
// ~/.cache/lockstep).
func CacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = filepath.Join(os.TempDir(), "lockstep-cache")
	}
	return filepath.Join(d, "lockstep")
}

func accelCachePath() string { return filepath.Join(CacheDir(), "accel.json") }

func hostKernel() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

var qemuVersions sync.Map // binary → string

// QEMUVersion returns the version QEMU reports ("7.2.22"), asking once per
// binary.
func QEMUVersion(binary string) (string, error) {
	if binary == "" {
		binary = defaultQEMU()
	}
	if v, ok := qemuVersions.Load(binary); ok {
		return v.(string), nil
	}
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", binary, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(first) // QEMU emulator version 7.2.22 (Debian …)
	v := ""
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			v = f[i+1]
		}
	}
	if v == "" {
		return "", fmt.Errorf("%s --version said %q: want \"QEMU emulator version X\"", binary, first)
	}
	qemuVersions.Store(binary, v)
	return v, nil
}

func defaultQEMU() string {
	if q := os.Getenv("LOCKSTEP_QEMU"); q != "" {
		return q
	}
	return "qemu-system-x86_64"
}

// CachedAccel returns the cached KVM verdict for this host kernel and QEMU
// version; ok is false when there is none (nothing was probed yet, or the
// kernel or QEMU changed since).
func CachedAccel() (v Verdict, ok bool, err error) {
	qv, err := QEMUVersion("")
	if err != nil {
		return Verdict{}, false, err
	}
	return cachedVerdict(hostKernel(), qv)
}

func cachedVerdict(kernel, qemuVersion string) (Verdict, bool, error) {
	b, err := os.ReadFile(accelCachePath())
	if errors.Is(err, os.ErrNotExist) {
		return Verdict{}, false, nil
	}
	if err != nil {
		return Verdict{}, false, fmt.Errorf("accel cache: %w", err)
	}
	var all []Verdict
	if err := json.Unmarshal(b, &all); err != nil {
		return Verdict{}, false, fmt.Errorf("accel cache %s: %w", accelCachePath(), err)
	}
	for _, v := range all {
		if v.Schema == verdictSchema && v.HostKernel == kernel && v.QEMUVersion == qemuVersion {
			return v, true, nil
		}
	}
	return Verdict{}, false, nil
}

func storeVerdict(v Verdict) error {
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return fmt.Errorf("accel cache: %w", err)
	}
	// Guests of one pool, or two lockstep processes, may store at once:
	// the read-modify-write of the file holds an flock, and each writer
	// renames its own temporary file into place.
	lock, err := os.OpenFile(filepath.Join(CacheDir(), "accel.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("accel cache: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("accel cache: %w", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	var all []Verdict
	if b, err := os.ReadFile(accelCachePath()); err == nil {
		json.Unmarshal(b, &all)
	}
	kept := []Verdict{v}
	for _, o := range all {
		if o.HostKernel != v.HostKernel || o.QEMUVersion != v.QEMUVersion {
			kept = append(kept, o)
		}
	}
	b, err := json.MarshalIndent(kept, "", "\t")
	if err != nil {
		return err
	}
	if err := safefile.WriteFile(accelCachePath(), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("accel cache: %w", err)
	}
	return nil
}

// kvmOpenable says whether /dev/kvm can be opened read-write; the reason
// names what is wrong when not.
func kvmOpenable() (bool, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, "/dev/kvm does not exist (no KVM on this host, or the kvm module is not loaded)"
	}
	if errors.Is(err, os.ErrPermission) {
		return false, "/dev/kvm is not writable by this user (add it to the kvm group, or chmod 0666 /dev/kvm)"
	}
	if err != nil {
		return false, fmt.Sprintf("open /dev/kvm: %v", err)
	}
	f.Close()
	return true, ""
}

var (
	probeMu   sync.Mutex
	warnOnce  sync.Once
	probeSeen = map[string]Verdict{} // this process's answers, by cache key
)

// kvmVerdict returns whether KVM runs guests here: /dev/kvm must open, and
// then the cached verdict or, without one, a probe boot decides.
func kvmVerdict(ctx context.Context, o *Options) (Verdict, error) {
	qv, err := QEMUVersion(o.QEMU)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Schema: verdictSchema, HostKernel: hostKernel(), QEMUVersion: qv}
	if ok, why := kvmOpenable(); !ok {
		v.Reason = why
		return v, nil
	}
	probeMu.Lock()
	defer probeMu.Unlock()
	key := v.HostKernel + "\x00" + qv
	if seen, ok := probeSeen[key]; ok {
		return seen, nil
	}
	if cached, ok, err := cachedVerdict(v.HostKernel, qv); err == nil && ok {
		probeSeen[key] = cached
		return cached, nil
	}
	v, err = probeKVM(ctx, o.Kernel, o.Machine, o.QEMU, o.Init, o.Log)
	if errors.Is(err, errProbeKernel) {
		// Not a verdict on KVM: decide for this run only.
		v.Reason = err.Error()
		return v, nil
	}
	if err != nil {
		return v, err
	}
	probeSeen[key] = v
	if err := storeVerdict(v); err != nil && o.Log != nil {
		o.Log.Warn("cannot cache the KVM verdict", "err", err)
	}
	return v, nil
}

// ProbeAccel boots kernel under KVM with a tiny job and a short deadline,
// caches the verdict and returns it. A QEMU abort or a guest that reports
// nothing in time makes KVM "present but unusable".
func ProbeAccel(ctx context.Context, kernel string, log *slog.Logger) (Verdict, error) {
	qv, err := QEMUVersion("")
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Schema: verdictSchema, HostKernel: hostKernel(), QEMUVersion: qv, ProbedAt: time.Now().UTC()}
	if ok, why := kvmOpenable(); !ok {
		v.Reason = why
		return v, nil
	}
	probeMu.Lock()
	defer probeMu.Unlock()
	v, err = probeKVM(ctx, kernel, "", "", "", log)
	if err != nil {
		return v, err
	}
	probeSeen[v.HostKernel+"\x00"+qv] = v
	return v, storeVerdict(v)
}

// errProbeKernel means the probe kernel did not boot under TCG either, so
// the KVM probe's failure says nothing about KVM; nothing is cached.
var errProbeKernel = errors.New("the probe kernel does not boot under TCG either")

func probeKVM(ctx context.Context, kernel, machine, qemu, init string, log *slog.Logger) (Verdict, error) {
	qv, err := QEMUVersion(qemu)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Schema: verdictSchema, HostKernel: hostKernel(), QEMUVersion: qv, ProbedAt: time.Now().UTC()}
	p := probe{kernel: kernel, machine: machine, qemu: qemu, init: init, log: log}
	var failures []string
	for _, cpu := range KVMCPUModels {
		if log != nil {
			log.Info("probing KVM with a boot", "cpu", cpu, "deadline", BootDeadlines[AccelKVM])
		}
		b, err := p.boot(ctx, AccelKVM, cpu, BootDeadlines[AccelKVM])
		if err != nil {
			return v, err
		}
		if b.ok {
			v.KVMUsable, v.CPU, v.CPUReason, v.BootMS = true, cpu, strings.Join(failures, "; "), b.elapsed.Milliseconds()
			return v, nil
		}
		failures = append(failures, "-cpu "+cpu+": "+b.reason)
		if !b.printed {
			// No guest code ran under KVM (QEMU gave up, or the console
			// stayed silent): a verdict on KVM, not on the model. On a
			// host whose KVM makes QEMU abort, qemu64 hung silently
			// until the deadline instead.
			break
		}
	}
	v.Reason = strings.Join(failures, "; ")
	// A control boot under TCG tells a broken KVM from a kernel that does
	// not boot this way at all; only the former is a verdict on KVM.
	if log != nil {
		log.Info("KVM probe failed; checking the probe kernel under TCG", "reason", v.Reason)
	}
	b, err := p.boot(ctx, AccelTCG, tcgCPU, BootDeadlines[AccelTCG])
	if err != nil {
		return v, err
	}
	if !b.ok {
		return v, fmt.Errorf("kvm probe: %w (%s)", errProbeKernel, b.reason)
	}
	return v, nil
}

// probe is what every probe boot shares: the kernel and how to boot it.
type probe struct {
	kernel, machine, qemu, init string
	log                         *slog.Logger
}

// probeBoot is how one probe boot went.
type probeBoot struct {
	// ok: the guest reported status 0 in time.
	ok bool
	// printed: the guest wrote to its console, so its code ran.
	printed bool
	reason  string
	elapsed time.Duration
}

// boot boots the kernel under accel with CPU model cpu and a probe job
// (PID 1 reports status 0 right after its mounts) and says whether it
// reported before the deadline, and if not why.
func (p probe) boot(ctx context.Context, accel, cpu string, deadline time.Duration) (probeBoot, error) {
	dir, err := os.MkdirTemp("", "lockstep-kvmprobe-")
	if err != nil {
		return probeBoot{}, fmt.Errorf("kvm probe: %w", err)
	}
	defer os.RemoveAll(dir)
	id := newID()
	job := &proto.Job{Schema: proto.SchemaVersion, ID: id, Probe: true}
	initrd := filepath.Join(dir, "initramfs")
	if _, err := guest.Initramfs(ctx, guest.InitramfsOptions{
		Init: p.init, Job: job, Output: initrd, Compression: initramfsCompression(),
		CacheDir: filepath.Join(CacheDir(), "initramfs"), Log: p.log,
	}); err != nil {
		return probeBoot{}, fmt.Errorf("kvm probe: %w", err)
	}
	console := filepath.Join(dir, "console.log")
	cfg := QEMUConfig{
		Binary: p.qemu, Name: "lockstep-kvmprobe-" + id, Machine: p.machine, Accel: accel, CPU: cpu, MemMB: 128, CPUs: 1,
		Kernel: p.kernel, Initramfs: initrd, Append: kernelCmdline(id, false, ""), ConsoleLog: console,
	}
	args, err := cfg.Args()
	if err != nil {
		return probeBoot{}, fmt.Errorf("kvm probe: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var stderr bytes.Buffer
	cmd := qemuCommand(pctx, qemuBinary(p.qemu), args, &limitedBuffer{b: &stderr, max: 64 << 10})
	if p.log != nil {
		p.log.Debug("probe boot", "qemu", shellquote.Join(append([]string{qemuBinary(p.qemu)}, args...)))
	}
	start := time.Now()
	runErr := cmd.Run()
	b := probeBoot{elapsed: time.Since(start)}
	if ctx.Err() != nil {
		return probeBoot{}, fmt.Errorf("kvm probe: %w", ctx.Err())
	}
	out, _ := os.ReadFile(console)
	b.printed = len(bytes.TrimSpace(out)) > 0
	status, got := proto.ParseStatus(out)
	// Which deadline ran out, named as the probe's own: the guests' boot
	// deadline is another (docs/harness.md, "Deadlines and hangs").
	ran := fmt.Sprintf("the %s probe's deadline (%v from QEMU's start to the status line) ran out", accel, deadline)
	switch {
	case got && status == 0 && runErr == nil:
		b.ok = true
	case pctx.Err() != nil && len(bytes.TrimSpace(out)) == 0:
		b.reason = ran + " with nothing on the console (present but unusable)"
	case pctx.Err() != nil:
		b.reason = fmt.Sprintf("%s before the guest finished (present but unusable); its console ended %q", ran, lastLine(out))
	case runErr != nil:
		b.reason = fmt.Sprintf("QEMU under %s failed (%v; KVM present but unusable): %s", accel, runErr, lastLine(stderr.Bytes()))
	default:
		b.reason = fmt.Sprintf("a guest under %s exited without its status line; its console said %q", accel, consoleClue(out))
	}
	return b, nil
}

// consoleClue is the console's line that says most about a guest that
// ended without its status: the first that reports a failure to start
// init or a panic (a panic's last line is "Kernel Offset: disabled"),
// else the last.
func consoleClue(b []byte) string {
	for _, l := range consoleLines(b, consoleTailLines) {
		if strings.Contains(l, "Failed to execute") || strings.Contains(l, "Kernel panic") {
			return l
		}
	}
	return lastLine(b)
}

func lastLine(b []byte) string {
	lines := consoleLines(b, 1)
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// resolveAccel turns auto into kvm or tcg, failing fast when kvm was asked
// for and cannot work, and picks the CPU model: under KVM the one asked
// for (Options.CPU, $LOCKSTEP_CPU), else the probe's; under TCG tcgCPU.
func resolveAccel(ctx context.Context, o *Options) (accel, cpu, reason string, err error) {
	switch o.Accel {
	case AccelTCG:
		return AccelTCG, tcgCPU, "asked for", nil
	case AccelKVM:
		v, err := kvmVerdict(ctx, o)
		if err != nil {
			return "", "", "", err
		}
		if !v.KVMUsable {
			return "", "", v.Reason, fmt.Errorf("%w: %s; use --accel tcg or auto", ErrKVMUnusable, v.Reason)
		}
		cpu, why := kvmCPU(o, v)
		return AccelKVM, cpu, "asked for" + why, nil
	case AccelAuto:
		v, err := kvmVerdict(ctx, o)
		if err != nil {
			return "", "", "", err
		}
		if v.KVMUsable {
			cpu, why := kvmCPU(o, v)
			return AccelKVM, cpu, "probed usable" + why, nil
		}
		warnOnce.Do(func() {
			if o.Log != nil {
				o.Log.Warn("KVM unusable, falling back to TCG (about 10x slower)", "reason", v.Reason)
			}
		})
		return AccelTCG, tcgCPU, "KVM unusable: " + v.Reason, nil
	}
	return "", "", "", fmt.Errorf("accel %q: want auto, kvm or tcg", o.Accel)
}

// kvmCPU is the CPU model for a KVM guest, and what the accelerator's
// reason adds about it: the model asked for, else the verdict's.
func kvmCPU(o *Options, v Verdict) (cpu, why string) {
	if c := askedCPU(o); c != "" {
		return c, "; cpu " + c + " asked for"
	}
	if v.CPUReason != "" {
		return v.CPU, "; cpu " + v.CPU + " (" + v.CPUReason + ")"
	}
	return v.CPU, ""
}

// askedCPU is the CPU model asked for: Options.CPU, else $LOCKSTEP_CPU;
// "" lets the probe choose.
func askedCPU(o *Options) string {
	if o.CPU != "" {
		return o.CPU
	}
	return os.Getenv(CPUEnv)
}
