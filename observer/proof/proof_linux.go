//go:build linux

package proof

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"golang.org/x/sys/unix"
)

// Options configures Run. WantABI is required.
type Options struct {
	// WantRelease is the release string (uname -r) the pin promises; empty
	// leaves the release check out.
	WantRelease string
	// WantABI is the pin's Landlock ABI; a kernel below it makes the proof
	// indeterminate (status 3).
	WantABI int
	// Exe is the lockstep binary to re-execute as the refusal child (and
	// the file the execute refusal tries to run); empty means this
	// executable.
	Exe string
	// Dir is a scratch directory for the fixture; empty means a new
	// temporary directory, removed afterwards.
	Dir string
	// Collector, if not nil, is used and left open; otherwise Run starts
	// its own and closes it.
	Collector *audit.Collector
	// Raw receives every record read, "<type> <netlink body>" per line, when
	// Run starts the collector.
	Raw io.Writer
	// Wait bounds the wait for each domain's deallocation record; zero
	// means 10 s.
	Wait time.Duration
	// PortBase is the first port of the network refusals; zero means 47000.
	PortBase int
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// Run proves the running kernel: see the package documentation. It returns
// an error only when the proof could not be attempted (no scratch
// directory, no executable); everything the kernel answers is in the
// Report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.WantABI <= 0 {
		return nil, errors.New("proof: the pin's Landlock ABI (WantABI) is required")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.PortBase == 0 {
		opts.PortBase = 47000
	}
	exe := opts.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("proof: find this executable: %w", err)
		}
	}
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil, fmt.Errorf("proof: resolve the executable: %w", err)
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "lockstep-proof."); err != nil {
			return nil, fmt.Errorf("proof: scratch directory: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("proof: resolve the scratch directory: %w", err)
	}

	rep := &Report{WantRelease: opts.WantRelease, WantABI: opts.WantABI}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		rep.Release = unix.ByteSliceToString(uts.Release[:])
	}
	if opts.WantRelease != "" {
		c := Check{Name: "release", Outcome: Held, Detail: rep.Release}
		if rep.Release != opts.WantRelease {
			c.Outcome, c.Detail = Failed, fmt.Sprintf("uname -r is %q, the pin wants %q", rep.Release, opts.WantRelease)
		}
		rep.Checks = append(rep.Checks, c)
	}
	rep.Checks = append(rep.Checks, checkLSM())
	abi, abiCheck := checkABI(opts.WantABI)
	rep.ABI = abi
	rep.Checks = append(rep.Checks, abiCheck)
	if e, err := ll.LandlockGetErrata(); err == nil {
		rep.Errata = e
	}

	coll := opts.Collector
	auditCheck := Check{Name: "audit", Gate: true}
	if coll == nil && abi >= landlock.ABIAuditRecords {
		coll, err = audit.Start(audit.Options{Raw: opts.Raw, Log: log})
		if err == nil {
			defer coll.Close()
		}
	}
	switch {
	case abi < landlock.ABIAuditRecords:
		auditCheck.Outcome, auditCheck.Detail = Failed, fmt.Sprintf("Landlock ABI %d writes no audit records (ABI %d and later do)", abi, landlock.ABIAuditRecords)
	case err != nil:
		auditCheck.Outcome, auditCheck.Detail = Failed, err.Error()
	default:
		auditCheck = checkAudit(coll)
	}
	rep.Checks = append(rep.Checks, auditCheck)

	fxErr := prepareFixture(dir)
	for i, rf := range Refusals {
		c := Check{Name: rf.Name, Blocker: rf.Blocker()}
		switch {
		case rf.ABI() > abi:
			c.Outcome, c.Detail = NotOffered, fmt.Sprintf("%s needs Landlock ABI %d, the kernel offers %d", rf.Blocker(), rf.ABI(), abi)
		case auditCheck.Outcome != Held:
			c.Outcome, c.Detail = Indeterminate, "not tried: audit is not collected"
		case fxErr != nil:
			c.Outcome, c.Detail = Indeterminate, fxErr.Error()
		default:
			log.Debug("refusal", "case", rf.Name)
			c = refuse(ctx, coll, rf, newFixture(dir, exe, opts.PortBase+i), opts.Wait)
		}
		rep.Checks = append(rep.Checks, c)
	}
	if coll != nil && auditCheck.Outcome == Held {
		if st, err := coll.Status(); err == nil {
			rep.Audit = &AuditCounters{Received: coll.Received(), Lost: st.Lost, BacklogLimit: st.BacklogLimit, RateLimit: st.RateLimit}
		}
	}
	rep.Finish()
	return rep, nil
}

func checkLSM() Check {
	c := Check{Name: "lsm", Gate: true}
	b, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		c.Outcome, c.Detail = Failed, fmt.Sprintf("read the LSM list: %v (is securityfs mounted?)", err)
		return c
	}
	list := strings.TrimSpace(string(b))
	for _, l := range strings.Split(list, ",") {
		if l == "landlock" {
			c.Outcome, c.Detail = Held, list
			return c
		}
	}
	c.Outcome, c.Detail = Failed, fmt.Sprintf("landlock is not in the LSM list %q (boot with lsm=landlock)", list)
	return c
}

func checkABI(want int) (int, Check) {
	c := Check{Name: "abi", Gate: true}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		c.Outcome, c.Detail = Failed, fmt.Sprintf("landlock_create_ruleset(VERSION): %v", err)
		return 0, c
	}
	if abi < want {
		c.Outcome, c.Detail = Failed, fmt.Sprintf("Landlock ABI %d, the pin wants at least %d", abi, want)
		return abi, c
	}
	c.Outcome, c.Detail = Held, fmt.Sprintf("Landlock ABI %d (pin: at least %d)", abi, want)
	return abi, c
}

func checkAudit(coll *audit.Collector) Check {
	c := Check{Name: "audit", Gate: true}
	st, err := coll.Status()
	if err != nil {
		c.Outcome, c.Detail = Failed, err.Error()
		return c
	}
	detail := fmt.Sprintf("enabled=%d pid=%d backlog_limit=%d rate_limit=%d lost=%d", st.Enabled, st.PID, st.BacklogLimit, st.RateLimit, st.Lost)
	var bad []string
	if st.Enabled == 0 {
		bad = append(bad, "audit is not enabled")
	}
	if int(st.PID) != os.Getpid() {
		bad = append(bad, fmt.Sprintf("the registered daemon is pid %d, not this process (%d)", st.PID, os.Getpid()))
	}
	if st.BacklogLimit < audit.DefaultBacklogLimit {
		bad = append(bad, fmt.Sprintf("backlog limit %d < %d", st.BacklogLimit, audit.DefaultBacklogLimit))
	}
	if st.RateLimit != 0 {
		bad = append(bad, fmt.Sprintf("rate limit %d, want 0", st.RateLimit))
	}
	if len(bad) > 0 {
		c.Outcome, c.Detail = Failed, strings.Join(bad, "; ")+" ("+detail+")"
		return c
	}
	c.Outcome, c.Detail = Held, detail
	return c
}

// prepareFixture creates the objects the filesystem refusals act on.
func prepareFixture(dir string) error {
	fx := newFixture(dir, "", 0)
	for _, d := range []string{fx.dir, fx.src, fx.dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("proof fixture: %w", err)
		}
	}
	for _, f := range []string{fx.file, fx.victim, fx.moved} {
		if err := os.WriteFile(f, []byte("lockstep proof\n"), 0o644); err != nil {
			return fmt.Errorf("proof fixture: %w", err)
		}
	}
	return nil
}

// expectObject checks a denial's object against the fixture.
func expectObject(rf Refusal, fx fixture, a *audit.Access) error {
	wantPath := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat the expected object: %w", err)
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if a.Path != p || a.Ino != ino {
			return fmt.Errorf("object path=%q ino=%d, want path=%q ino=%d", a.Path, a.Ino, p, ino)
		}
		return nil
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	switch rf.Right {
	case landlock.ReadFile, landlock.WriteFile, landlock.Truncate:
		return wantPath(fx.file)
	case landlock.ReadDir, landlock.MakeReg, landlock.MakeDir, landlock.RemoveFile, landlock.MakeSym:
		return wantPath(fx.dir)
	case landlock.Execute:
		return wantPath(fx.exe)
	case landlock.Refer:
		return wantPath(fx.dst)
	case landlock.IoctlDev:
		if err := wantPath(devNull); err != nil {
			return err
		}
		if !a.HasIoctlCmd || a.IoctlCmd != unix.TCGETS {
			return fmt.Errorf("ioctlcmd=%#x, want %#x", a.IoctlCmd, unix.TCGETS)
		}
	case landlock.BindTCP, landlock.BindUDP:
		if a.Src != uint16(fx.port) || a.SAddr != loopback {
			return fmt.Errorf("saddr=%v src=%d, want saddr=127.0.0.1 src=%d", a.SAddr, a.Src, fx.port)
		}
	case landlock.ConnectTCP, landlock.ConnectSendUDP:
		if a.Dest != uint16(fx.port) || a.DAddr != loopback {
			return fmt.Errorf("daddr=%v dest=%d, want daddr=127.0.0.1 dest=%d", a.DAddr, a.Dest, fx.port)
		}
	case landlock.Signal:
		if a.OPid != os.Getpid() {
			return fmt.Errorf("opid=%d, want this process %d", a.OPid, os.Getpid())
		}
	default:
		panic("BUG(lockstep): no object expectation for refusal " + rf.Name)
	}
	return nil
}

// runChild re-executes fx.exe as the refusal child for case name and
// waits for it.
func runChild(ctx context.Context, name string, fx fixture) (pid int, stdout []byte, stderr string, err error) {
	cmd := exec.CommandContext(ctx, fx.exe)
	cmd.Env = append(os.Environ(), "LOCKSTEP_ROLE="+Role, envCase+"="+name,
		envDir+"="+filepath.Dir(fx.file), envPort+"="+strconv.Itoa(fx.port), envExe+"="+fx.exe)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		pid = cmd.Process.Pid
	}
	return pid, out.Bytes(), errb.String(), err
}

// refuse runs one refusal child and judges its records.
func refuse(ctx context.Context, coll *audit.Collector, rf Refusal, fx fixture, wait time.Duration) Check {
	c := Check{Name: rf.Name, Blocker: rf.Blocker()}
	sp := specs[rf.Name]
	run, err := coll.Begin(ctx)
	if err != nil {
		c.Outcome, c.Detail = Indeterminate, err.Error()
		return c
	}
	pid, stdout, stderr, runErr := runChild(ctx, rf.Name, fx)
	res, endErr := run.End(ctx, func(p int) bool { return p == pid }, wait)
	if endErr != nil {
		c.Outcome, c.Detail = Indeterminate, endErr.Error()
		return c
	}
	c.Evidence = evidence(res)
	var rep childReport
	if err := json.Unmarshal(bytes.TrimSpace(stdout), &rep); err != nil {
		c.Outcome, c.Detail = Failed, fmt.Sprintf("the refusal child gave no report (%v): %s", runErr, oneLine(stderr))
		return c
	}
	if unix.Errno(rep.Errno) != sp.want {
		c.Outcome, c.Detail = Failed, fmt.Sprintf("%s returned %s, want %s", syscallName(int(sp.nr)), errnoName(rep.Errno), errnoName(int(sp.want)))
		return c
	}
	if res.Indeterminate() {
		c.Outcome, c.Detail = Indeterminate, strings.Join(res.Problems, "; ")
		return c
	}
	ds := res.Denials()
	if len(ds) != 1 {
		c.Outcome, c.Detail = Failed, fmt.Sprintf("%d LANDLOCK_ACCESS record(s) for pid %d, want exactly 1", len(ds), pid)
		return c
	}
	d := ds[0]
	var problems []string
	if len(d.Access.Blockers) != 1 || d.Access.Blockers[0] != rf.Blocker() {
		problems = append(problems, fmt.Sprintf("blockers=%s, want %s", strings.Join(d.Access.Blockers, ","), rf.Blocker()))
	}
	if err := expectObject(rf, fx, &d.Access); err != nil {
		problems = append(problems, err.Error())
	}
	switch s := d.Syscall; {
	case s == nil:
		problems = append(problems, fmt.Sprintf("no SYSCALL record with serial %d", d.Record.Serial))
	case s.Pid != pid || s.Nr != int(sp.nr) || s.Exit != -int64(sp.want):
		problems = append(problems, fmt.Sprintf("SYSCALL pid=%d syscall=%d exit=%d, want pid=%d syscall=%d (%s) exit=%d",
			s.Pid, s.Nr, s.Exit, pid, sp.nr, syscallName(int(sp.nr)), -int64(sp.want)))
	}
	if len(problems) > 0 {
		c.Outcome, c.Detail = Failed, strings.Join(problems, "; ")
		return c
	}
	c.Outcome = Held
	c.Detail = fmt.Sprintf("1 record: %s %s; %s by pid %d, exit %d", rf.Blocker(), object(&d.Access), syscallName(d.Syscall.Nr), pid, d.Syscall.Exit)
	return c
}

func object(a *audit.Access) string {
	switch {
	case a.Path != "" && a.HasIoctlCmd:
		return fmt.Sprintf("path=%s ioctlcmd=%#x", a.Path, a.IoctlCmd)
	case a.Path != "":
		return "path=" + a.Path
	case a.Src != 0:
		return fmt.Sprintf("saddr=%v src=%d", a.SAddr, a.Src)
	case a.Dest != 0:
		return fmt.Sprintf("daddr=%v dest=%d", a.DAddr, a.Dest)
	case a.OPid != 0:
		return fmt.Sprintf("opid=%d ocomm=%s", a.OPid, a.OComm)
	}
	return "(no object)"
}

// evidence lists the records of the run's accepted domains and their
// SYSCALL records as "<type> <body>" lines.
func evidence(res *audit.RunResult) []string {
	serials := map[uint64]bool{}
	domains := map[uint64]bool{}
	for _, d := range res.Domains {
		domains[d.Allocated.Domain] = true
		for _, dn := range d.Denials {
			serials[dn.Record.Serial] = true
		}
	}
	var out []string
	for i := range res.Records {
		r := &res.Records[i]
		keep := serials[r.Serial]
		if r.Type == audit.TypeLandlockDomain {
			if d, err := r.Domain(); err == nil && domains[d.Domain] {
				keep = true
			}
		}
		if keep {
			out = append(out, strconv.Itoa(int(r.Type))+" "+r.Body())
		}
	}
	return out
}

func errnoName(e int) string {
	if e == 0 {
		return "success"
	}
	if n := unix.ErrnoName(unix.Errno(e)); n != "" {
		return n
	}
	return "errno " + strconv.Itoa(e)
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// syscallName names the system calls the refusals make.
func syscallName(nr int) string {
	switch uintptr(nr) {
	case unix.SYS_OPENAT:
		return "openat"
	case unix.SYS_TRUNCATE:
		return "truncate"
	case unix.SYS_EXECVE:
		return "execve"
	case unix.SYS_MKDIRAT:
		return "mkdirat"
	case unix.SYS_UNLINKAT:
		return "unlinkat"
	case unix.SYS_SYMLINKAT:
		return "symlinkat"
	case unix.SYS_RENAMEAT:
		return "renameat"
	case unix.SYS_IOCTL:
		return "ioctl"
	case unix.SYS_BIND:
		return "bind"
	case unix.SYS_CONNECT:
		return "connect"
	case unix.SYS_KILL:
		return "kill"
	}
	return "syscall " + strconv.Itoa(nr)
}
