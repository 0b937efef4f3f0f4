package machine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	libaudit "github.com/elastic/go-libaudit/v2"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/internal/auditnl"
	"golang.org/x/sys/unix"
)

// SchemaVersion is the version of the Facts JSON document (docs/probe.md).
// It changes when a field is removed or changes meaning, not when one is added.
const SchemaVersion = 1

// Facts is what Probe found. Its JSON form is documented in docs/probe.md.
type Facts struct {
	SchemaVersion int      `json:"schema_version"`
	Kernel        Kernel   `json:"kernel"`
	Landlock      Landlock `json:"landlock"`
	LSM           LSM      `json:"lsm"`
	Audit         Audit    `json:"audit"`
	KVM           KVM      `json:"kvm"`
	QEMU          Tool     `json:"qemu"`
	Strace        Tool     `json:"strace"`
	Cgroup        Cgroup   `json:"cgroup"`
	Ptrace        Ptrace   `json:"ptrace"`
}

// Kernel is uname(2).
type Kernel struct {
	Release string `json:"release"`
	Machine string `json:"machine"`
}

// Landlock is the running kernel's Landlock support.
type Landlock struct {
	// ABI is the Landlock ABI version; 0 when Landlock is unavailable.
	ABI int `json:"abi"`
	// Errata is the bitmask of fixed Landlock errata (Linux 6.15+; 0
	// before), ErrataBits its set bits.
	Errata     int   `json:"errata"`
	ErrataBits []int `json:"errata_bits"`
	// Error says why the ABI could not be read ("" when it could).
	Error string `json:"error"`
	// Unrestricted names what this ABI cannot restrict at all (the
	// enforcer's gaps: unix-connect, udp, …); filled by the caller
	// (cmd/lockstep), empty here.
	Unrestricted []string `json:"unrestricted"`
}

// LSM is /sys/kernel/security/lsm.
type LSM struct {
	// Readable is false when securityfs is not mounted (or the file is
	// missing); List is then empty and Error says why.
	Readable bool     `json:"readable"`
	List     []string `json:"list"`
	Landlock bool     `json:"landlock"`
	Error    string   `json:"error"`
}

// Audit is the kernel audit subsystem, as AUDIT_GET reports it.
type Audit struct {
	// Available: the audit netlink socket answered AUDIT_GET.
	Available bool `json:"available"`
	// Enabled: 0 off, 1 on, 2 on and locked (immutable).
	Enabled      uint32 `json:"enabled"`
	Backlog      uint32 `json:"backlog"`
	BacklogLimit uint32 `json:"backlog_limit"`
	Lost         uint32 `json:"lost"`
	RateLimit    uint32 `json:"rate_limit"`
	// DaemonPID is the registered audit daemon's pid, 0 for none.
	DaemonPID uint32 `json:"daemon_pid"`
	// CanRegister: this process may register as the audit daemon
	// (CAP_AUDIT_CONTROL in the initial user namespace, audit reachable,
	// no live daemon registered). Nothing is registered to find out;
	// RegisterReason says why not.
	CanRegister    bool   `json:"can_register"`
	RegisterReason string `json:"register_reason"`
	Error          string `json:"error"`
}

// KVM is /dev/kvm. Present says the device node exists, not that KVM is
// usable (that is the harness's accel probe).
type KVM struct {
	Present    bool   `json:"present"`
	CharDevice bool   `json:"char_device"`
	Error      string `json:"error"`
	// Usable is the harness's verdict from booting a guest under KVM:
	// "usable", "unusable", or "unknown" (never measured on this host
	// kernel and QEMU version). Probe leaves it "unknown"; the caller fills
	// it from the harness's cache, or by booting (lockstep probe --boot).
	Usable string `json:"usable"`
	// UsableReason says why KVM is unusable, or why the verdict is unknown.
	UsableReason string `json:"usable_reason"`
	// ProbedAt is when the verdict was measured (RFC 3339), "" if never.
	ProbedAt string `json:"probed_at"`
	// CPU is the CPU model KVM guests get, the first the probe booted
	// ("" unless usable); CPUReason why the models before it failed.
	CPU       string `json:"cpu"`
	CPUReason string `json:"cpu_reason"`
}

// Tool is an external program found on PATH.
type Tool struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Error   string `json:"error"`
}

// Cgroup is what the cgroup file systems under /sys/fs/cgroup offer.
type Cgroup struct {
	// Root is /sys/fs/cgroup; RootType its file system: "cgroup2",
	// "tmpfs" (a v1 or hybrid layout), or another name.
	Root     string `json:"root"`
	RootType string `json:"root_type"`
	// V2 is true when Root itself is cgroup2; V2Path names the cgroup2
	// mount (Root, or Root/unified in a hybrid layout, or "").
	V2          bool     `json:"v2"`
	V2Path      string   `json:"v2_path"`
	V2Writable  bool     `json:"v2_writable"`
	Controllers []string `json:"v2_controllers"`
	// V1Pids and V1Memory: a cgroup v1 hierarchy with that controller is
	// mounted under Root.
	V1Pids   bool `json:"v1_pids"`
	V1Memory bool `json:"v1_memory"`
	// EnforcerCaps is what `lockstep run` would use for nproc and
	// mem_mb caps: "v2", "v1" or "none:<why>" (filled by the caller, which
	// may create a cgroup to find out; "" when not asked).
	EnforcerCaps string `json:"enforcer_caps"`
	Error        string `json:"error"`
}

// Ptrace is kernel.yama.ptrace_scope.
type Ptrace struct {
	// YamaScope is 0–3, or -1 when Yama is absent (no
	// /proc/sys/kernel/yama/ptrace_scope): then only the classic
	// same-uid/CAP_SYS_PTRACE rules apply.
	YamaScope int    `json:"yama_scope"`
	Error     string `json:"error"`
}

// Probe gathers the facts. It runs `qemu-system-<arch> --version` and
// `strace -V` with ctx (and a 10 s bound each).
func Probe(ctx context.Context) *Facts {
	f := &Facts{SchemaVersion: SchemaVersion}
	f.Kernel = probeKernel()
	f.Landlock = probeLandlock()
	f.LSM = probeLSM("/sys/kernel/security/lsm")
	f.Audit = probeAudit()
	f.KVM = probeKVM("/dev/kvm")
	f.QEMU = probeTool(ctx, QEMUBinary(), "--version", "QEMU emulator version ")
	f.Strace = probeTool(ctx, "strace", "-V", "strace -- version ")
	f.Cgroup = probeCgroup("/sys/fs/cgroup")
	f.Ptrace = probePtrace("/proc/sys/kernel/yama/ptrace_scope")
	return f
}

// QEMUBinary names the system emulator for this machine's architecture.
func QEMUBinary() string {
	switch runtime.GOARCH {
	case "arm64":
		return "qemu-system-aarch64"
	default:
		return "qemu-system-x86_64"
	}
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Release is the running kernel's release (uname -r), "" if unknown.
func Release() string { return probeKernel().Release }

func probeKernel() Kernel {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Kernel{}
	}
	return Kernel{Release: cstr(u.Release[:]), Machine: cstr(u.Machine[:])}
}

func probeLandlock() Landlock {
	var l Landlock
	l.ErrataBits, l.Unrestricted = []int{}, []string{}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		l.Error = fmt.Sprintf("landlock_create_ruleset(VERSION): %v (Landlock not built, or not in the lsm= boot list)", err)
		return l
	}
	l.ABI = abi
	if e, err := ll.LandlockGetErrata(); err == nil {
		l.Errata = e
		for b := 0; b < 31; b++ {
			if e&(1<<b) != 0 {
				l.ErrataBits = append(l.ErrataBits, b+1)
			}
		}
	}
	return l
}

func probeLSM(path string) LSM {
	l := LSM{List: []string{}}
	data, err := os.ReadFile(path)
	if err != nil {
		l.Error = fmt.Sprintf("%v (is securityfs mounted on /sys/kernel/security?)", err)
		return l
	}
	l.Readable = true
	for _, s := range strings.Split(strings.TrimSpace(string(data)), ",") {
		if s != "" {
			l.List = append(l.List, s)
			l.Landlock = l.Landlock || s == "landlock"
		}
	}
	return l
}

// capAuditControl is CAP_AUDIT_CONTROL's bit in CapEff.
const capAuditControl = 30

// initUserNS is the inode number of the initial user namespace.
const initUserNS = "user:[4026531837]"

func probeAudit() Audit {
	var a Audit
	c, err := libaudit.NewAuditClient(nil)
	if err != nil {
		a.Error = fmt.Sprintf("open the audit netlink socket: %v", err)
		a.RegisterReason = "audit is not reachable"
		return a
	}
	defer c.Close()
	st, err := auditnl.Status(c, 5*time.Second)
	if err != nil {
		a.Error = fmt.Sprintf("AUDIT_GET: %v", err)
		a.RegisterReason = "audit is not reachable"
		return a
	}
	a.Available = true
	a.Enabled, a.Backlog, a.BacklogLimit, a.Lost, a.RateLimit, a.DaemonPID = st.Enabled, st.Backlog, st.BacklogLimit, st.Lost, st.RateLimit, st.PID
	a.CanRegister, a.RegisterReason = canRegister(st.PID)
	return a
}

func canRegister(daemon uint32) (bool, string) {
	capEff, err := capEff()
	if err != nil {
		return false, err.Error()
	}
	if capEff&(1<<capAuditControl) == 0 {
		return false, "this process lacks CAP_AUDIT_CONTROL"
	}
	if ns, err := os.Readlink("/proc/self/ns/user"); err != nil || ns != initUserNS {
		return false, fmt.Sprintf("not in the initial user namespace (%s)", ns)
	}
	if daemon != 0 && unix.Kill(int(daemon), 0) == nil {
		return false, fmt.Sprintf("pid %d is registered as the audit daemon", daemon)
	}
	return true, ""
}

func capEff() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("/proc/self/status has no CapEff line")
}

func probeKVM(path string) KVM {
	k := KVM{Usable: "unknown", UsableReason: "not measured here; lockstep probe --boot measures it"}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return k
	case err != nil:
		k.Error = err.Error()
		return k
	}
	k.Present = true
	k.CharDevice = st.Mode()&os.ModeCharDevice != 0
	return k
}

// probeTool runs `name arg` and takes the version after prefix on the first
// line that has it.
func probeTool(ctx context.Context, name, arg, prefix string) Tool {
	var t Tool
	path, err := exec.LookPath(name)
	if err != nil {
		t.Error = fmt.Sprintf("%s not found on PATH", name)
		return t
	}
	t.Path = path
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, arg).CombinedOutput()
	if err != nil {
		t.Error = fmt.Sprintf("%s %s: %v", path, arg, err)
		return t
	}
	v, err := parseVersion(out, prefix)
	if err != nil {
		t.Error = fmt.Sprintf("%s %s: %v", path, arg, err)
	}
	t.Version = v
	return t
}

// parseVersion returns the first word after prefix in out, e.g. "7.2.22"
// from "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)".
func parseVersion(out []byte, prefix string) (string, error) {
	for _, line := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(line, prefix); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0], nil
			}
		}
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return "", fmt.Errorf("no %q in the output (first line %q)", strings.TrimSpace(prefix), first)
}

func fsType(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Type, nil
}

func probeCgroup(root string) Cgroup {
	c := Cgroup{Root: root, Controllers: []string{}}
	t, err := fsType(root)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	switch t {
	case unix.CGROUP2_SUPER_MAGIC:
		c.RootType = "cgroup2"
		c.V2 = true
		c.V2Path = root
	case unix.TMPFS_MAGIC:
		c.RootType = "tmpfs"
	case unix.CGROUP_SUPER_MAGIC:
		c.RootType = "cgroup"
	default:
		c.RootType = fmt.Sprintf("%#x", t)
	}
	if !c.V2 {
		if t, err := fsType(filepath.Join(root, "unified")); err == nil && t == unix.CGROUP2_SUPER_MAGIC {
			c.V2Path = filepath.Join(root, "unified")
		}
	}
	if c.V2Path != "" {
		c.V2Writable = unix.Access(c.V2Path, unix.W_OK) == nil
		if data, err := os.ReadFile(filepath.Join(c.V2Path, "cgroup.controllers")); err == nil {
			c.Controllers = append(c.Controllers, strings.Fields(string(data))...)
		}
	}
	if t, err := fsType(filepath.Join(root, "pids")); err == nil && t == unix.CGROUP_SUPER_MAGIC {
		c.V1Pids = true
	}
	if t, err := fsType(filepath.Join(root, "memory")); err == nil && t == unix.CGROUP_SUPER_MAGIC {
		c.V1Memory = true
	}
	return c
}

func probePtrace(path string) Ptrace {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Ptrace{YamaScope: -1}
	}
	if err != nil {
		return Ptrace{YamaScope: -1, Error: err.Error()}
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return Ptrace{YamaScope: -1, Error: fmt.Sprintf("%s: %v", path, err)}
	}
	return Ptrace{YamaScope: n}
}

// MeminfoMB returns the named /proc/meminfo fields (MemTotal, MemAvailable,
// SwapTotal, …) in MiB; a field that cannot be read is absent.
func MeminfoMB(fields ...string) map[string]int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return map[string]int64{}
	}
	return parseMeminfoMB(b, fields)
}

func parseMeminfoMB(b []byte, fields []string) map[string]int64 {
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, rest, ok := strings.Cut(l, ":")
		if !ok || !slices.Contains(fields, k) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[k] = kb >> 10
		}
	}
	return out
}
