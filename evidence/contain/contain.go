package contain

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	// so only the limit under test can end the probe (the CPU check: on a
	// busy machine the wall-clock timeout could come first).
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
		pl.check(Check{Name: "limit nproc", Args: []string{"nproc", strconv.FormatInt(v, 10)}, WantErrno: "EAGAIN", WantStatus: []int{137}, Control: true})
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

// Probe runs the probe with c.Args, under the policy when sandboxed (with
// its timeout off when c.WithoutTimeout), and returns its exit status and
// stdout.
type Probe func(ctx context.Context, sandboxed bool, c Check) (status int, stdout []byte, err error)

// ProbeOutput is the probe's parsed stdout.
type ProbeOutput struct {
	Started bool
	// Errno is the last OP line's errno ("0" on success, "" when none).
	Errno string
	Line  string
}

// ParseOutput reads the probe's stdout.
func ParseOutput(b []byte) ProbeOutput {
	var o ProbeOutput
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "START":
			o.Started = true
		case strings.HasPrefix(l, "OP "):
			o.Line = l
			if i := strings.LastIndex(l, " errno="); i >= 0 {
				o.Errno = l[i+len(" errno="):]
			}
		}
	}
	return o
}

// ParseOps reads a batch probe's stdout (Batch): whether it started, and
// each OP line's outcome in order, one per operation it got to.
func ParseOps(b []byte) (started bool, ops []ProbeOutput) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "START":
			started = true
		case strings.HasPrefix(l, "OP "):
			ops = append(ops, ParseOutput([]byte("START\n"+l)))
		}
	}
	return started, ops
}

// Run runs every check. It returns the record's checks (unchecked ones
// appended, sorted by name) and the names of the checks that did not hold
// (the probe was not refused, or its control failed). The error is for a
// probe that could not run at all.
//
// The checks that wait a limit out (timeout, cpu: no control, refused by
// the enforcer's status) run beside the others, each in its own goroutine:
// they cost their limit's seconds each (60 s and 30 s for the floors every
// pruned policy has), and one after another they were most of a prune's
// containment stage. Every probe is its own process under its own copy of
// the policy, so running them at once changes no result. The checks that
// read an errno (batchable) run as two probe processes, every control in
// one and every try under the policy in another (runBatch): a probe
// process is a start of the lockstep binary, and under the enforcer three
// (its own, the re-executed child's, the probe's), which is most of a
// check's cost in a guest under TCG.
func Run(ctx context.Context, checks []Check, un []record.ContainmentCheck, probe Probe) ([]record.ContainmentCheck, []string, error) {
	results := make([]checkResult, len(checks))
	var wg sync.WaitGroup
	var batch []int
	for i, c := range checks {
		switch {
		case waitsOut(c):
			wg.Go(func() { results[i].rc, results[i].failed, results[i].err = runCheck(ctx, c, probe) })
		case batchable(c):
			batch = append(batch, i)
		}
	}
	for i, c := range checks {
		if !waitsOut(c) && !batchable(c) {
			results[i].rc, results[i].failed, results[i].err = runCheck(ctx, c, probe)
		}
	}
	batchErr := runBatch(ctx, checks, batch, probe, results)
	wg.Wait()
	if batchErr != nil {
		return nil, nil, batchErr
	}
	var out []record.ContainmentCheck
	var failed []string
	for _, r := range results {
		if r.err != nil {
			return nil, nil, r.err
		}
		out = append(out, r.rc)
		if r.failed != "" {
			failed = append(failed, r.failed)
		}
	}
	out = append(out, un...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, failed, nil
}

// checkResult is one check's outcome in Run.
type checkResult struct {
	rc     record.ContainmentCheck
	failed string
	err    error
}

// batchable reports whether c reads only the errno of an operation that
// returns, so it can share a probe process with others: not a check by
// status (nproc's 137, the waits), not one run without the timeout.
func batchable(c Check) bool {
	if c.WantErrno == "" || len(c.WantStatus) > 0 || c.WithoutTimeout || len(c.Args) == 0 {
		return false
	}
	switch c.Args[0] {
	case "read", "write", "create", "connect", "bind", "nofile", "mem", "fsize":
		return true
	}
	return false
}

// runBatch runs the checks at idx as runCheck would, in two probe
// processes: the controls together without any sandbox, then, under the
// policy, every check whose control held (or that has none). Each
// operation's outcome is its own OP line; the status a message names is
// the one a probe of that operation alone exits with (0 done, 1 refused),
// or the batch's when the probe ended before it.
func runBatch(ctx context.Context, checks []Check, idx []int, probe Probe, results []checkResult) error {
	var controls, tries []int
	for _, i := range idx {
		results[i].rc = record.ContainmentCheck{Name: checks[i].Name, Arguments: checks[i].Args}
		if checks[i].Control {
			controls = append(controls, i)
		} else {
			tries = append(tries, i)
		}
	}
	if len(controls) > 0 {
		st, _, ops, _, err := runOps(ctx, false, checks, controls, probe)
		if err != nil {
			return fmt.Errorf("containment controls: %w", err)
		}
		for k, i := range controls {
			rc := &results[i].rc
			if k >= len(ops) || ops[k].Errno != "0" {
				line := ""
				if k < len(ops) {
					st, line = opStatus(ops[k]), ops[k].Line
				}
				rc.Control = fmt.Sprintf("failed: status %d, %s", st, strings.TrimSpace(line))
				rc.Unchecked = "unproven: the probe fails without any sandbox too"
				results[i].failed = checks[i].Name + " (unproven)"
				continue
			}
			rc.Control = "ok: " + ops[k].Line
			tries = append(tries, i)
		}
	}
	if len(tries) == 0 {
		return nil
	}
	sort.Ints(tries)
	st, started, ops, out, err := runOps(ctx, true, checks, tries, probe)
	if err != nil {
		return err
	}
	if !started {
		return fmt.Errorf("%s: the probe did not start under the policy (status %d): %s", checkNames(checks, tries), st, bytes.TrimSpace(out))
	}
	for k, i := range tries {
		c, rc := checks[i], &results[i].rc
		var po ProbeOutput
		ost := st
		if k < len(ops) {
			po, ost = ops[k], opStatus(ops[k])
		}
		rc.Refused = po.Errno == c.WantErrno
		if !rc.Refused {
			results[i].failed = fmt.Sprintf("%s (status %d, %s)", c.Name, ost, strings.TrimSpace(po.Line))
		}
	}
	return nil
}

// runOps runs the operations of checks at idx in one probe process and
// returns its status, whether it started, each operation's outcome in
// order, and its output.
func runOps(ctx context.Context, sandboxed bool, checks []Check, idx []int, probe Probe) (int, bool, []ProbeOutput, []byte, error) {
	var args [][]string
	for _, i := range idx {
		args = append(args, checks[i].Args)
	}
	st, out, err := probe(ctx, sandboxed, Check{Name: checkNames(checks, idx), Args: Batch(args...)})
	if err != nil {
		return 0, false, nil, nil, err
	}
	started, ops := ParseOps(out)
	return st, started, ops, out, nil
}

// opStatus is the status a probe of one operation exits with.
func opStatus(po ProbeOutput) int {
	if po.Errno == "0" {
		return 0
	}
	return 1
}

func checkNames(checks []Check, idx []int) string {
	var n []string
	for _, i := range idx {
		n = append(n, checks[i].Name)
	}
	return strings.Join(n, ", ")
}

// waitsOut reports whether c waits a limit out (refused by status alone).
func waitsOut(c Check) bool { return !c.Control && len(c.WantStatus) > 0 }

// runCheck runs c's control (if any) and c under the policy. It returns the
// record's check and, when it did not hold, why.
func runCheck(ctx context.Context, c Check, probe Probe) (record.ContainmentCheck, string, error) {
	rc := record.ContainmentCheck{Name: c.Name, Arguments: c.Args}
	if c.Control {
		st, b, err := probe(ctx, false, c)
		if err != nil {
			return rc, "", fmt.Errorf("%s: control: %w", c.Name, err)
		}
		po := ParseOutput(b)
		if !po.Started || st != 0 || po.Errno != "0" {
			rc.Control = fmt.Sprintf("failed: status %d, %s", st, strings.TrimSpace(po.Line))
			rc.Unchecked = "unproven: the probe fails without any sandbox too"
			return rc, c.Name + " (unproven)", nil
		}
		rc.Control = "ok: " + po.Line
	}
	st, b, err := probe(ctx, true, c)
	if err != nil {
		return rc, "", fmt.Errorf("%s: %w", c.Name, err)
	}
	po := ParseOutput(b)
	if !po.Started {
		return rc, "", fmt.Errorf("%s: the probe did not start under the policy (status %d): %s", c.Name, st, bytes.TrimSpace(b))
	}
	if c.WantErrno != "" {
		rc.Refused = po.Errno == c.WantErrno
	}
	for _, s := range c.WantStatus {
		if st == s {
			rc.Refused = true
		}
	}
	if !rc.Refused {
		return rc, fmt.Sprintf("%s (status %d, %s)", c.Name, st, strings.TrimSpace(po.Line)), nil
	}
	return rc, "", nil
}

// Plant writes each canary (0644, CanaryText), creating its directory, and
// returns the files and directories it created, for Remove.
func Plant(canaries []string) ([]string, error) {
	var created []string
	for _, c := range canaries {
		dir := filepath.Dir(c)
		var mk []string
		for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			}
			mk = append(mk, d)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return created, fmt.Errorf("planting canary %s: %w", c, err)
		}
		created = append(created, mk...)
		_, err := os.Lstat(c)
		existed := err == nil
		// A canary that is already there is written all the same. In a
		// guest whose root is the host's / under an overlay, the write
		// copies it up, so the guest's canary no longer depends on the
		// host's: a containment run on the host (pruner/prune's host
		// tests beside cmd/lockstep's guest prune in one go test ./...)
		// removed its canary under the guest's feet, and the guest's
		// control read failed ("canary … (unproven)").
		if err := os.WriteFile(c, []byte(CanaryText), 0o644); err != nil {
			return created, fmt.Errorf("planting canary %s: %w", c, err)
		}
		if !existed {
			created = append(created, c)
		}
	}
	return created, nil
}

// Remove removes what Plant created, files before their directories.
func Remove(created []string) {
	sort.Slice(created, func(i, j int) bool { return len(created[i]) > len(created[j]) })
	for _, p := range created {
		os.Remove(p)
	}
}
