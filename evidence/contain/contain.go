package contain

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/record"
)

// DefaultCanaries are planted before the first run: files no policy may
// let a probe read.
var DefaultCanaries = []string{"/srv/lockstep-prune-canary/secret", "/root/lockstep-prune-canary"}

// CanaryText is what a canary file holds.
const CanaryText = "lockstep-prune-canary\n"

// DefaultMaxSeconds caps the timeout and CPU checks (each costs that long);
// it is the second rung of the timeout ladder, so a 120 s timeout is checked.
const DefaultMaxSeconds = 120

// Probe caps beyond which a limit is recorded as unchecked.
const (
	MaxNoFile  = 4000
	MaxNProc   = 600
	MaxMemMB   = 20000
	MaxFsizeMB = 600
)

// MinProbeMemMB is the least mem_mb (RLIMIT_AS) under which the probe, a Go
// program, starts: the Go runtime reserves its page summaries and heap arena
// map at start, and under 700 MiB it dies ("fatal error: failed to reserve
// page summary memory"; measured: starts at 768, not at 700). Below it the
// mem_mb check is unchecked and the other checks run under the policy
// without its mem_mb (each checks a rule or another limit, not memory).
const MinProbeMemMB = 1024

// memBelowProbe says whether p's mem_mb is set below MinProbeMemMB.
func memBelowProbe(p *policy.Policy) bool {
	l, ok := p.Limits[policy.MemMB]
	return ok && !l.Off && l.Value > 0 && l.Value < MinProbeMemMB
}

// Check is one containment check.
type Check struct {
	Name string
	// Args are the probe's arguments (operation first).
	Args []string
	// WantErrno is the errno the probe must report under the policy, or
	// WantStatus the enforcer's statuses that count as a refusal.
	WantErrno  string
	WantStatus []int
	// Control asks for a run without any sandbox first, which must succeed.
	Control bool
	// WithoutTimeout asks for the policy with its timeout switched off,
	// so only the limit under test can end the probe (the cpu and nproc
	// checks: on a busy machine the wall-clock timeout could come first).
	WithoutTimeout bool
	// Cap, when longer than the setup's probe timeout, bounds this
	// check's probe instead: the cpu probe may spin CPUSpinBound seconds
	// of CPU, and a wall-clock cap that stopped it first would leave the
	// check without an outcome.
	Cap time.Duration
}

// PlanOptions are the facts Plan needs besides the policy.
type PlanOptions struct {
	// Canaries are the planted canary files.
	Canaries []string
	// ListenPort is a 127.0.0.1 TCP port the caller listens on for the
	// connect check (0: no connect check); FreePort a port nothing holds
	// for the bind check (0: none).
	ListenPort, FreePort int
	// WritableDir is a directory the policy grants [write] and [create]
	// on, for the fsize check ("" none).
	WritableDir string
	// ReadOnlyFile picks a regular file beneath a read-only grant ("" none);
	// nil means the first regular file found walking it.
	ReadOnlyFile func(dir string) string
	// MaxSeconds caps the timeout and cpu checks; 0 means DefaultMaxSeconds.
	MaxSeconds int
	// MemoryMB is this machine's RAM plus swap; a mem_mb limit at or
	// beyond it is unchecked (the unsandboxed control could not map it
	// either). 0 means unknown: no such cap.
	MemoryMB int64
	// NProcUnenforced, when not empty, says why the nproc limit cannot
	// hold here (uid 0, which RLIMIT_NPROC does not bind, and no cgroup for
	// the enforcer's process cap); the check is then recorded as unchecked.
	NProcUnenforced string
}

func unchecked(name, why string) record.ContainmentCheck {
	return record.ContainmentCheck{Name: name, Arguments: []string{}, Unchecked: why}
}

func special(p string) bool {
	for _, r := range []string{"/proc", "/sys", "/dev"} {
		if p == r || policy.Beneath(p, r) {
			return true
		}
	}
	return false
}

// firstFile returns the first regular file (sorted walk) at or beneath p.
func firstFile(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return ""
	}
	if fi.Mode().IsRegular() {
		return p
	}
	if !fi.IsDir() {
		return ""
	}
	found := ""
	n := 0
	filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		n++
		if err != nil || found != "" || n > 10000 {
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			found = q
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// Plan lists the checks for policy p (with its limits).
func Plan(p *policy.Policy, o PlanOptions) ([]Check, []record.ContainmentCheck) {
	pl := &plan{p: p, o: o}
	for _, c := range o.Canaries {
		pl.check(Check{Name: "canary " + c, Args: []string{"read", c}, WantErrno: "EACCES", Control: true})
	}
	pl.readOnly()
	pl.connect()
	pl.bind()
	pl.fileLimits()
	pl.timeLimits()
	return pl.cs, pl.un
}

// plan gathers Plan's checks and the checks it leaves out, with why.
type plan struct {
	p  *policy.Policy
	o  PlanOptions
	cs []Check
	un []record.ContainmentCheck
}

func (pl *plan) check(c Check) { pl.cs = append(pl.cs, c) }

func (pl *plan) skip(name, why string) { pl.un = append(pl.un, unchecked(name, why)) }

// limit is the policy's limit k, and whether it is set, on and positive.
func (pl *plan) limit(k policy.LimitKey) (int64, bool) {
	l, ok := pl.p.Limits[k]
	return l.Value, ok && !l.Off && l.Value > 0
}

// writeUnder says a write-class grant covers q.
func (pl *plan) writeUnder(q string) bool {
	for w, secs := range pl.p.FS {
		for s, on := range secs {
			if on && policy.IsWriteClass(s) && (w == q || policy.Beneath(q, w)) {
				return true
			}
		}
	}
	return false
}

// readOnly is a write into a read-only path: a regular file the policy
// lets the exercise read and no write-class grant covers.
func (pl *plan) readOnly() {
	const name = "write into a read-only path"
	pick := pl.o.ReadOnlyFile
	if pick == nil {
		pick = firstFile
	}
	for _, q := range pl.p.Paths(policy.Read) {
		if special(q) || pl.writeUnder(q) {
			continue
		}
		if f := pick(q); f != "" && !pl.writeUnder(f) {
			pl.check(Check{Name: name, Args: []string{"write", f}, WantErrno: "EACCES", Control: true})
			return
		}
	}
	pl.skip(name, "the policy grants [read] on no regular file outside /proc, /sys, /dev and every write-class grant")
}

// connect is a connect to a loopback port no [connect] rule names.
func (pl *plan) connect() {
	const name = "connect to an unnamed loopback port"
	covered := func(port int) bool {
		for _, r := range pl.p.Connect {
			if r.Transport != policy.TCP {
				continue
			}
			if (r.Port == 0 || r.Port == port) && (r.Host == "127.0.0.1" || r.Host == "localhost" || r.Host == "*" || strings.HasPrefix(r.Host, "127.") || strings.Contains(r.Host, "/")) {
				return true
			}
		}
		return false
	}
	switch port := pl.o.ListenPort; {
	case port == 0:
		pl.skip(name, "no loopback listener was given")
	case covered(port):
		pl.skip(name, fmt.Sprintf("a [connect] rule covers 127.0.0.1:%d", port))
	default:
		pl.check(Check{Name: name, Args: []string{"connect", "127.0.0.1:" + strconv.Itoa(port)}, WantErrno: "EACCES", Control: true})
	}
}

// bind is a bind of a free port no [bind] rule names.
func (pl *plan) bind() {
	const name = "bind of an ungranted port"
	bound := false
	for _, r := range pl.p.Bind {
		if r.Transport == policy.TCP && r.Port == pl.o.FreePort {
			bound = true
		}
	}
	switch {
	case pl.o.FreePort == 0:
		pl.skip(name, "no free port was given")
	case bound:
		pl.skip(name, fmt.Sprintf("[bind] allow %d", pl.o.FreePort))
	default:
		pl.check(Check{Name: name, Args: []string{"bind", "127.0.0.1:" + strconv.Itoa(pl.o.FreePort)}, WantErrno: "EACCES", Control: true})
	}
}

// fileLimits are the checks of the nofile, nproc, mem_mb and fsize_mb
// limits.
func (pl *plan) fileLimits() {
	if v, ok := pl.limit(policy.NoFile); !ok {
		pl.skip("limit nofile", "not set")
	} else if v >= MaxNoFile {
		pl.skip("limit nofile", fmt.Sprintf("%d is beyond the probe's cap %d", v, MaxNoFile))
	} else {
		pl.check(Check{Name: "limit nofile", Args: []string{"nofile", strconv.FormatInt(v, 10)}, WantErrno: "EMFILE", Control: true})
	}
	if v, ok := pl.limit(policy.NProc); !ok {
		pl.skip("limit nproc", "not set")
	} else if pl.o.NProcUnenforced != "" {
		pl.skip("limit nproc", pl.o.NProcUnenforced)
	} else if v >= MaxNProc {
		pl.skip("limit nproc", fmt.Sprintf("%d is beyond the probe's cap %d", v, MaxNProc))
	} else {
		// 137: the enforcer's cgroup cap was passed and it killed the
		// probe, possibly before the probe could print its EAGAIN.
		// Without the timeout: starting v+1 probes is not a wait a
		// timeout bounds, and on a busy machine (or under TCG) it can
		// outlast a short one; the timeout then ended the probe (124)
		// before the cap was reached, and the check did not hold.
		pl.check(Check{Name: "limit nproc", Args: []string{"nproc", strconv.FormatInt(v, 10)}, WantErrno: "EAGAIN", WantStatus: []int{137},
			Control: true, WithoutTimeout: true})
	}
	if v, ok := pl.limit(policy.MemMB); !ok {
		pl.skip("limit mem_mb", "not set")
	} else if v >= MaxMemMB {
		pl.skip("limit mem_mb", fmt.Sprintf("%d is beyond the probe's cap %d", v, MaxMemMB))
	} else if memBelowProbe(pl.p) {
		pl.skip("limit mem_mb", fmt.Sprintf("%d MiB is below the %d MiB the probe (a Go program) needs to start; the other checks ran without it", v, MinProbeMemMB))
	} else if pl.o.MemoryMB > 0 && v+1 >= pl.o.MemoryMB {
		pl.skip("limit mem_mb", fmt.Sprintf("%d MiB is beyond this machine's memory and swap (%d MiB): the control could not map it either", v, pl.o.MemoryMB))
	} else {
		pl.check(Check{Name: "limit mem_mb", Args: []string{"mem", strconv.FormatInt(v, 10)}, WantErrno: "ENOMEM", Control: true})
	}
	if v, ok := pl.limit(policy.FsizeMB); !ok {
		pl.skip(FsizeCheck, "not set")
	} else if v >= MaxFsizeMB {
		pl.skip(FsizeCheck, fmt.Sprintf("%d is beyond the probe's cap %d", v, MaxFsizeMB))
	} else if pl.o.WritableDir == "" {
		pl.skip(FsizeCheck, "no directory with [write] and [create]")
	} else {
		pl.check(Check{Name: FsizeCheck, Args: []string{"fsize", strconv.FormatInt(v, 10), pl.o.WritableDir}, WantErrno: "EFBIG", Control: true})
	}
}

// FsizeCheck names the check of the fsize_mb limit, the one check that
// writes into the working directory (Setup.WorkDir).
const FsizeCheck = "limit fsize_mb"

// TimeoutCheck names the check of the timeout limit: a probe that sleeps
// past it, so it takes the limit's whole time and almost no CPU (a caller
// can run it beside other work: Setup.Only and Setup.Skip).
const TimeoutCheck = "limit timeout"

// timeLimits are the checks of the timeout and cpu limits, each bounded by
// the probe's cap (MaxSeconds).
func (pl *plan) timeLimits() {
	maxS := pl.o.MaxSeconds
	if maxS <= 0 {
		maxS = DefaultMaxSeconds
	}
	tms, tok := pl.limit(policy.Timeout)
	t := (tms + 999) / 1000
	if !tok {
		pl.skip(TimeoutCheck, "not set")
	} else if t > int64(maxS) {
		pl.skip(TimeoutCheck, fmt.Sprintf("%d s is beyond the probe's cap %d s", t, maxS))
	} else {
		pl.check(Check{Name: TimeoutCheck, Args: []string{"sleep", strconv.FormatInt(t+5, 10)}, WantStatus: []int{124}})
	}
	if v, ok := pl.limit(policy.CPU); !ok {
		pl.skip("limit cpu", "not set")
	} else if v > int64(maxS) {
		pl.skip("limit cpu", fmt.Sprintf("%d s is beyond the probe's cap %d s", v, maxS))
	} else {
		pl.check(Check{Name: "limit cpu", Args: []string{"spin", strconv.FormatInt(CPUSpinBound(v), 10)}, WantStatus: []int{137, 152}, WithoutTimeout: true,
			Cap: time.Duration(2*CPUSpinBound(v)) * time.Second}) // the spin at half a CPU
	}
}

// CPUSpinBound is how many seconds of CPU time, by the clock getrusage
// reads, the cpu probe spins before it gives up on being stopped by a cpu
// limit of v. The kernel holds RLIMIT_CPU to tick-sampled CPU time, and a
// guest whose vCPUs are starved loses ticks: two TCG guests on two busy
// cores spun 35 s by getrusage under cpu=30 and were never killed (v+5 was
// the bound then), while each guest alone was. The limit holds when the
// probe is killed at all; the bound only ends a probe it never stops.
func CPUSpinBound(v int64) int64 { return 3*v + 10 }
