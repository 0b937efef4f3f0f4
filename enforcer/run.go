package enforcer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"golang.org/x/sys/unix"
)

// RoleEnv is the environment variable that makes a re-executed lockstep (or
// test binary) play the restricted child; ChildRole is its value. The child
// removes it before it executes the command.
const (
	RoleEnv   = "LOCKSTEP_ROLE"
	ChildRole = "enforcer-child"
)

// Options is one command to run under a policy. The zero value of each field
// is documented beside it.
type Options struct {
	// Policy is what the command may do; nil grants nothing.
	Policy *policy.Policy
	// Command is the argv; Command[0] is looked up in the PATH of Env
	// when it has no slash. Required.
	Command []string
	// LogSubprocesses sets LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so the
	// kernel audits denials after the exec (ABI 7+; refused below).
	LogSubprocesses bool
	// Dir is the command's working directory; "" keeps the caller's. It
	// need not be granted by the policy (changing directory is not an
	// operation Landlock restricts).
	Dir string
	// Env is the command's environment, as given; nil means the caller's
	// variables that SafeEnvName lets pass (CommandEnv(os.Environ(),
	// nil)): no token, key, agent socket or LD_PRELOAD of the caller
	// reaches the command unless put here on purpose.
	Env []string
	// Stdin, Stdout, Stderr are the command's streams; nil means
	// /dev/null for Stdin and the caller's os.Stdout/os.Stderr.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Hash is the policy hash shown on the status line and compared with
	// ExpectHash; "" means Policy.Hash().
	Hash string
	// ExpectHash, when set, must equal Hash, or nothing runs
	// (ErrHashMismatch, exit 125).
	ExpectHash string
	// Self is the executable re-executed as the restricted child when
	// rlimits or cgroups are needed; any binary importing this package
	// qualifies (its init dispatches RoleEnv=ChildRole to ChildMain). ""
	// means os.Executable().
	Self string
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL when the timeout passes; 0 means 2 s.
	KillGrace time.Duration
	// Quiet leaves out the status line.
	Quiet bool
	// RequireABI, when above the running kernel's Landlock ABI, refuses
	// the run (exit 125): a caller that needs what an older ABI leaves
	// unrestricted (landlock.Gaps) says so here. 0 requires nothing.
	RequireABI int
	// Without names isolation layers (Layers) the command does without;
	// nil means every layer. The status line names them (without=).
	// The observer and the pruner run with MeasureWithout.
	Without []string
	// RequireIsolation refuses the run (exit 125) when a layer not
	// switched off cannot be had here, naming it and why; otherwise the
	// status line names it (unisolated=) and the command runs without it.
	RequireIsolation bool
}

// childSpec is what the parent hands the child over fd 3.
type childSpec struct {
	Ruleset *Ruleset  `json:"ruleset"`
	Command []string  `json:"command"`
	Env     []string  `json:"env"`
	Dir     string    `json:"dir,omitempty"`
	Rlimits []rlimitV `json:"rlimits,omitempty"`
	Cgroups []string  `json:"cgroups,omitempty"`
	// Caps are cgroup files the child writes once its Go runtime's
	// threads are up and before it restricts itself (pids.max of a v2
	// cgroup the child was born in: see caps.pidsMax).
	Caps   map[string]string `json:"caps,omitempty"`
	Status string            `json:"status,omitempty"`
	// Setsid: the child starts a session of its own before it execs
	// (see startReexec).
	Setsid bool `json:"setsid,omitempty"`
	// DefaultSignals: the child was started by the shell init, as an
	// asynchronous command, with SIGINT and SIGQUIT ignored; the command
	// gets them at their defaults, as it would from lockstep.
	DefaultSignals bool `json:"default_signals,omitempty"`
	// Isolate is what the child sets up in its namespaces before it
	// restricts itself (nil: no layer).
	Isolate *isolateSpec `json:"isolate,omitempty"`
}

type rlimitV struct {
	Name     string `json:"name"`
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// childReport is what the child writes to fd 4 when it fails before exec.
type childReport struct {
	Status int    `json:"status"`
	Msg    string `json:"msg"`
}

// Prepared is a policy checked and compiled for this kernel, with its status
// line: what Run would apply. Prepare is Run without running.
type Prepared struct {
	Ruleset *Ruleset
	Hash    string
	rlimits []rlimitV
	timeout time.Duration
	nproc   int64
	memMB   int64
	off     []string // isolation layers switched off
}

// Prepare checks opts against the running kernel and compiles the ruleset,
// refusing (exit 125) everything Run would refuse before starting anything.
func Prepare(opts Options) (*Prepared, error) {
	hash := opts.Hash
	if hash == "" && opts.Policy != nil {
		hash = opts.Policy.Hash()
	}
	if opts.ExpectHash != "" && opts.ExpectHash != hash {
		return nil, errorf(ErrHashMismatch, "policy hash mismatch: the policy hashes to %s, --expect-hash wants %s. Nothing ran.", hash, opts.ExpectHash)
	}
	abi, err := HostABI()
	if err != nil {
		return nil, err
	}
	if abi < landlock.ABIFirst {
		return nil, errorf(ErrNoLandlock, "landlock is not available (ABI %d); refusing to run unprotected. Nothing ran.", abi)
	}
	if abi < opts.RequireABI {
		return nil, errorf(ErrRefused, "this kernel's Landlock ABI is %d, lower than the %d required%s. Nothing ran.",
			abi, opts.RequireABI, gapList(abi, opts.RequireABI))
	}
	row, _ := Row(abi)
	rs, err := Compile(opts.Policy, row, opts.LogSubprocesses, osStat)
	if err != nil {
		return nil, err
	}
	if err := resolvePathRules(rs); err != nil {
		return nil, err
	}
	rs.ABI = abi
	off, err := switchedOff(opts.Without)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Ruleset: rs, Hash: hash, off: off}
	if opts.Policy != nil {
		p.rlimits, p.timeout, p.nproc, p.memMB = limitsOf(opts.Policy.Limits)
		if _, err := opts.Policy.Limits[policy.Timeout].Duration(policy.Timeout); err != nil {
			return nil, errorf(ErrRefused, "%v. Nothing ran.", err)
		}
	}
	return p, nil
}

// StatusLine renders the line written to stderr before the command starts:
//
//	lockstep: OK abi=7 handled=fs,net,scope rules=12 net=tcp-ports hash=sha256:…
//
// followed, when they apply, by log=new-exec, missing=<n> (paths the policy
// names that do not exist here), cgroup=<v2|v1|none:reason> (when nproc or
// mem_mb asks for a cap), unrestricted=<gap,…> (what this ABI cannot
// restrict whatever the policy says: Unrestricted), newer-abi-unhandled
// (a kernel newer than landlock.ABITable) and without=<layer,…> (isolation
// layers switched off). The enforcer child adds unisolated=<layer,…>, the
// layers it could not set up.
func (p *Prepared) StatusLine(cgroup string) string {
	rs := p.Ruleset
	var b strings.Builder
	fmt.Fprintf(&b, "lockstep: OK abi=%d handled=%s rules=%d net=%s hash=%s", rs.ABI, rs.Handled(), rs.Rules(), rs.Net, orNone(p.Hash))
	if rs.Flags&landlock.RestrictLogNewExecOn != 0 {
		b.WriteString(" log=new-exec")
	}
	if len(rs.Missing) > 0 {
		fmt.Fprintf(&b, " missing=%d", len(rs.Missing))
	}
	if cgroup != "" {
		b.WriteString(" cgroup=" + cgroup)
	}
	if gaps := landlock.Unrestricted(rs.ABI); len(gaps) > 0 {
		b.WriteString(" unrestricted=" + landlock.GapNames(gaps))
	}
	if _, newer := Row(rs.ABI); newer {
		b.WriteString(" newer-abi-unhandled")
	}
	if len(p.off) > 0 {
		b.WriteString(" without=" + strings.Join(p.off, ","))
	}
	return b.String()
}

// gapList says which gaps ABI have leaves open that ABI want closes, each
// with what goes unrestricted ("" when none).
func gapList(have, want int) string {
	var parts []string
	for _, g := range landlock.Unrestricted(have) {
		if g.Since() <= want {
			parts = append(parts, fmt.Sprintf("%s (%s; ABI %d)", g.Name, g.What, g.Since()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; here stay unrestricted: " + strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// limitsOf turns [limits] into rlimits, a timeout and the cgroup caps.
func limitsOf(l map[policy.LimitKey]policy.Limit) (rl []rlimitV, timeout time.Duration, nproc, memMB int64) {
	on := func(k policy.LimitKey) (int64, bool) {
		v, ok := l[k]
		if !ok || v.Off || v.Value <= 0 {
			return 0, false
		}
		return v.Value, true
	}
	if _, ok := on(policy.Timeout); ok {
		timeout, _ = l[policy.Timeout].Duration(policy.Timeout) // Prepare refuses what does not fit
	}
	if v, ok := on(policy.CPU); ok {
		rl = append(rl, rlimitV{"cpu", unix.RLIMIT_CPU, uint64(v)})
	}
	if v, ok := on(policy.MemMB); ok {
		rl = append(rl, rlimitV{"mem_mb", unix.RLIMIT_AS, uint64(v) << 20})
		memMB = v
	}
	if v, ok := on(policy.NProc); ok {
		rl = append(rl, rlimitV{"nproc", unix.RLIMIT_NPROC, uint64(v)})
		nproc = v
	}
	if v, ok := on(policy.NoFile); ok {
		rl = append(rl, rlimitV{"nofile", unix.RLIMIT_NOFILE, uint64(v)})
	}
	if v, ok := on(policy.FsizeMB); ok {
		rl = append(rl, rlimitV{"fsize_mb", unix.RLIMIT_FSIZE, uint64(v) << 20})
	}
	return rl, timeout, nproc, memMB
}

func osStat(path string, follow bool) (FileKind, error) {
	var st unix.Stat_t
	var err error
	if follow {
		err = unix.Stat(path, &st)
	} else {
		err = unix.Lstat(path, &st)
	}
	switch {
	case policy.IsMissing(err):
		return KindMissing, nil
	case err != nil:
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return KindDir, nil
	case unix.S_IFLNK:
		return KindSymlink, nil
	}
	return KindFile, nil
}

// Run runs opts.Command under opts.Policy and returns the exit status a
// caller should exit with, and an error saying why when that status is the
// enforcer's own (124 timeout, 125 refused, 126 cannot execute, 127 not
// found, 137 cap passed). A command's own status comes back with a nil error
// (killed by a signal: 128+signal).
//
// The caller is never restricted: a re-executed child (Options.Self with
// RoleEnv=ChildRole), cloned into its v2 cgroup (or joining v1 ones), writes
// the process cap, sets the rlimits, restricts itself
// and executes the command in a new process group. When the command ends,
// anything it left in its process group or cgroup is killed.
func Run(ctx context.Context, opts Options) (int, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return StatusRefused, errorf(ErrRefused, "no command given")
	}
	prep, err := Prepare(opts)
	if err != nil {
		return Status(err), err
	}
	// The reaper removes the cgroups should this process die without
	// doing it (SIGKILL); deferred first, it is told last that all is done.
	rp := &reaper{self: selfPath(opts)}
	defer rp.close()
	cg := setupCaps(prep.nproc, prep.memMB, rp)
	cgDesc := ""
	if cg != nil {
		cgDesc = cg.desc
	}
	if !cg.ok() && !noContainment {
		cg.remove()
		cg = setupContainment(rp)
	}
	defer cg.remove()
	env := opts.Env
	if env == nil {
		env = CommandEnv(os.Environ(), nil)
	}
	spec := childSpec{
		Ruleset: prep.Ruleset,
		Command: opts.Command,
		Env:     withoutRole(env),
		Dir:     opts.Dir,
		Rlimits: prep.rlimits,
	}
	if cg.ok() {
		spec.Cgroups = cg.dirs
	}
	if !opts.Quiet {
		spec.Status = prep.StatusLine(cgDesc)
	}
	iso := planIsolation(prep.off, prep.Ruleset, opts.RequireIsolation)
	if len(iso.on) > 0 {
		spec.Dir = cleanDir(opts.Dir)
	}
	status, err := startChild(ctx, opts, prep, cg, &spec, iso)
	switch rerr := rp.failed(); {
	case rerr == nil:
	case err == nil:
		return StatusRefused, errorf(ErrRefused, "%v (the command's status: %d)", rerr, status)
	default:
		err = fmt.Errorf("%w; and %v", err, rerr)
	}
	return status, err
}

// selfPath is the executable re-executed as the enforcer child and the
// cgroup reaper: Options.Self, else this one ("" when it cannot be found;
// starting it then fails and says so).
func selfPath(opts Options) string {
	if opts.Self != "" {
		return opts.Self
	}
	self, _ := os.Executable()
	return self
}

func withoutRole(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, RoleEnv+"=") {
			out = append(out, e)
		}
	}
	return out
}

// startHook, when set (tests only), may change how the enforcer child is
// cloned into its cgroup (clone3 CLONE_INTO_CGROUP) before it is.
var startHook func(attr *syscall.SysProcAttr)

// noContainment turns off the containment cgroup (tests of the process-group
// kill alone).
var noContainment = false

// startChild starts the command and waits for it. A re-executed child
// (ChildMain) sets the rlimits, joins or is born in the cgroup, restricts
// itself and execs the command in place, so no thread of lockstep is ever
// in the command's Landlock domain: the signal and ptrace scopes keep the
// command from lockstep. (A direct path once restricted a thread of
// lockstep and forked the command from it, one Go start-up fewer; that
// thread had to live until the command ended, for the parent-death
// signal, and the command could SIGSTOP it, and so the whole of lockstep,
// to outlive its timeout, or ptrace it. docs/security.md.) The forking
// thread lives until the command has ended: the command's parent-death
// signal (SIGKILL, so that it dies with lockstep) fires when that thread
// ends, not when the process does.
func startChild(ctx context.Context, opts Options, prep *Prepared, cg *caps, spec *childSpec, iso *isolation) (int, error) {
	cmd, release, status, err := startReexec(opts, spec, cg, iso)
	if err != nil {
		return status, err
	}
	defer release()
	return wait(ctx, opts, prep, cg, cmd)
}

// onLockedThread runs start on a goroutine locked to its OS thread and keeps
// that thread until release is called (see startChild); the thread ends
// then, with whatever start did to it.
func onLockedThread(start func() error) (release func(), err error) {
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := start()
		errc <- err
		if err == nil {
			<-done
		}
	}()
	if err := <-errc; err != nil {
		return func() {}, err
	}
	return sync.OnceFunc(func() { close(done) }), nil
}

// commandStreams sets the command's streams and how it meets the caller's
// terminal. Whatever the streams, the command gets a seccomp filter that
// refuses TIOCSTI and TIOCLINUX (SyscallRules), and dies with lockstep
// (Pdeathsig). Then:
//
//   - stdin is lockstep's controlling terminal: the command stays in the
//     caller's session, in a process group of its own, made the foreground
//     group when lockstep is (so it may read the terminal, and Ctrl-C
//     reaches it). Taking it out of the session would lift job control: the
//     kernel stops a background reader (SIGTTIN) only on its controlling
//     terminal, so a command in a session of its own could read, behind
//     the caller's shell, what is typed to other programs.
//   - lockstep has a controlling terminal, but stdin is not it: a session
//     of its own (setsid), with no controlling terminal, so /dev/tty opens
//     nothing and no terminal signal of the caller's reaches it.
//   - lockstep has no controlling terminal (a CI job, the pruner): a
//     process group of its own, as there is no terminal to keep from the
//     command. A new session costs there: it is a new scheduler autogroup,
//     in which a [limits] run took 9 ms more on a loaded machine.
func commandStreams(opts Options, cmd *exec.Cmd) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	f, _ := cmd.Stdin.(*os.File)
	switch pg, ctty := controllingPgrp(f); {
	case ctty && pg == unix.Getpgrp():
		attr.Setpgid, attr.Foreground, attr.Ctty = true, true, 0
	case ctty || !hasControllingTerminal():
		attr.Setpgid = true
	default:
		attr.Setsid = true
	}
	cmd.SysProcAttr = attr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
}

// startReexec starts this executable as the enforcer child (ChildMain) and
// sends it its instructions. With one v2 cgroup the child is born in it
// (clone3 CLONE_INTO_CGROUP) and does not join: a write to cgroup.procs
// migrates a running process, which waits for an RCU grace period under the
// cgroup threadgroup lock (9.5 to 18 ms per run measured here); a clone
// into the cgroup does not.
func startReexec(opts Options, spec *childSpec, cg *caps, iso *isolation) (*exec.Cmd, func(), int, error) {
	self := selfPath(opts)
	if self == "" {
		return nil, nil, StatusRefused, errorf(ErrRefused, "find own executable to re-execute. Nothing ran.")
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, nil, StatusRefused, errorf(ErrRefused, "pipe: %v", err)
	}
	defer specR.Close()
	defer specW.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, nil, StatusRefused, errorf(ErrRefused, "pipe: %v", err)
	}
	defer repR.Close()
	defer repW.Close()
	cgfd := -1
	if cg.bornIn() && (!iso.init || iso.shell) {
		cgfd, err = unix.Open(cg.dirs[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, nil, StatusRefused, errorf(ErrRefused, "open cgroup %s: %v. Nothing ran.", cg.dirs[0], err)
		}
		defer unix.Close(cgfd)
	}
	files := []*os.File{specR, repW}
	var cmd *exec.Cmd
	var sent childSpec
	release, err := onLockedThread(func() error {
		cmd, sent = childCommand(opts, self, files, spec, cg, iso, cgfd)
		err := cmd.Start()
		if err != nil && cmd.SysProcAttr.UseCgroupFD {
			// clone3 into the cgroup refused (a kernel before 5.7, an
			// unusual cgroup set-up): the child joins it instead.
			cmd, sent = childCommand(opts, self, files, spec, cg, iso, -1)
			err = cmd.Start()
		}
		if err != nil && iso.clone != 0 {
			// Not root and no user namespaces, or a kernel without
			// one of them: the command runs without the layers,
			// named on the status line (or refused by the child
			// under RequireIsolation).
			iso.without(err)
			cmd, sent = childCommand(opts, self, files, spec, cg, iso, cgfd)
			err = cmd.Start()
		}
		return err
	})
	if err != nil {
		return nil, nil, StatusRefused, errorf(ErrRefused, "start the enforcer child %s: %v", self, err)
	}
	specR.Close()
	repW.Close()
	enc := json.NewEncoder(specW)
	encErr := enc.Encode(&sent)
	specW.Close()

	// The report pipe closes on exec (success) or carries the failure.
	rep, _ := io.ReadAll(repR)
	if len(rep) > 0 || encErr != nil {
		_ = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		release()
		var r childReport
		if err := json.Unmarshal(rep, &r); err != nil || r.Status == 0 {
			return nil, nil, StatusRefused, errorf(ErrRefused, "the enforcer child failed before exec: %q (spec: %v)", strings.TrimSpace(string(rep)), encErr)
		}
		switch r.Status {
		case StatusNotFound:
			return nil, nil, r.Status, errorf(ErrNotFound, "%s", r.Msg)
		case StatusCannotExec:
			return nil, nil, r.Status, errorf(ErrCannotExec, "%s", r.Msg)
		}
		return nil, nil, StatusRefused, errorf(ErrRefused, "%s. Nothing ran.", r.Msg)
	}
	return cmd, release, 0, nil
}

// childCommand is the command that starts the enforcer child, and the
// instructions to send it. The child (or, with the pid layer, the
// namespace's init) is cloned into its v2 cgroup through cgfd (-1: the
// child joins the cgroups itself). The init is initScript, run by
// initShell: a shell starts in about a millisecond, a second start of this
// Go program cost a run of `true` 4.6 ms more. Without the shell it is
// InitMain, which clones the child into the cgroup itself and stays out
// of it, so that its threads count against no nproc cap.
func childCommand(opts Options, self string, files []*os.File, spec *childSpec, cg *caps, iso *isolation, cgfd int) (*exec.Cmd, childSpec) {
	cmd := &exec.Cmd{
		Path:       self,
		Args:       []string{self},
		Env:        append(withoutRole(os.Environ()), RoleEnv+"="+ChildRole),
		ExtraFiles: files,
		WaitDelay:  time.Second,
	}
	commandStreams(opts, cmd)
	sent := *spec
	if len(iso.on) > 0 {
		is := iso.spec
		sent.Isolate = &is
	}
	iso.attr(cmd.SysProcAttr)
	shellInit := iso.init && iso.shell
	if file, value := cg.pidsMax(); file != "" {
		if shellInit && cgfd >= 0 {
			// The shell init is born in the cgroup too: one task, always.
			value = strconv.FormatInt(cg.nproc+1, 10)
		}
		sent.Caps = map[string]string{file: value}
	}
	if shellInit {
		place := initGroup
		if cmd.SysProcAttr.Setsid {
			place = initSession
		}
		cmd.Path, cmd.Args = initShell, []string{initShell, "-c", initScript, self, place}
		sent.DefaultSignals = true
	} else if iso.init {
		cgdir := ""
		if cg.bornIn() {
			cgdir, sent.Cgroups = cg.dirs[0], nil
		}
		cmd.Args = []string{self, initPlacement(cmd.SysProcAttr), cgdir}
		cmd.Env = append(withoutRole(os.Environ()), RoleEnv+"="+InitRole)
		return cmd, sent
	}
	if cmd.SysProcAttr.Setsid {
		// The child calls setsid itself, once its Go runtime is up: a Go
		// process started in a new session (a new scheduler autogroup)
		// took twice as long to start on a loaded machine (4.6 against
		// 9.9 ms for `lockstep help`).
		// Until then it stays in lockstep's process group, which it
		// cannot leave for a session while leading a group of its own.
		cmd.SysProcAttr.Setsid = false
		sent.Setsid = true
	}
	if cgfd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
		sent.Cgroups = nil
		if startHook != nil {
			startHook(cmd.SysProcAttr)
		}
	}
	return cmd, sent
}

// wait waits for the started command, enforcing the timeout and the cgroup
// caps, and kills whatever the command leaves in its process group or
// cgroup.
func wait(ctx context.Context, opts Options, prep *Prepared, cg *caps, cmd *exec.Cmd) (int, error) {
	pgid := cmd.Process.Pid
	killGroup := func(sig syscall.Signal) {
		_ = syscall.Kill(-pgid, sig)
		// The re-executed child leads no group until its setsid.
		_ = syscall.Kill(pgid, sig)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// cmd.Wait also waits for the output pipes, which a leftover process
	// may hold open; learn of the exit itself without reaping (WNOWAIT),
	// so the leftovers die at once.
	exited := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		close(exited)
	}()
	var timer <-chan time.Time
	if prep.timeout > 0 {
		t := time.NewTimer(prep.timeout)
		defer t.Stop()
		timer = t.C
	}
	var poll <-chan time.Time
	if cg.ok() && (cg.pidsEv != "" || cg.memEv != "") {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		poll = tk.C
	}
	grace := opts.KillGrace
	if grace == 0 {
		grace = 2 * time.Second
	}
	var why error
	var waitErr error
	var hardKill <-chan time.Time
	ctxDone := ctx.Done()
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-exited:
			exited = nil
			killGroup(syscall.SIGKILL)
			_ = cg.killAll(time.Second)
		case <-timer:
			timer = nil
			why = errorf(ErrTimeout, "timeout %s passed; process group killed", prep.timeout)
			killGroup(syscall.SIGTERM)
			hardKill = time.After(grace)
		case <-hardKill:
			killGroup(syscall.SIGKILL)
			_ = cg.killAll(time.Second)
		case <-poll:
			if msg := cg.passed(); msg != "" && why == nil {
				why = errorf(ErrCapPassed, "%s; every process of the command killed", msg)
				killGroup(syscall.SIGKILL)
				_ = cg.killAll(time.Second)
				poll = nil
			}
		case <-ctxDone:
			ctxDone = nil
			if why == nil {
				why = errorf(ErrInterrupted, "interrupted (%v); process group killed", context.Cause(ctx))
			}
			killGroup(syscall.SIGKILL)
			_ = cg.killAll(time.Second)
		}
	}
	// Nothing the command started outlives it.
	killGroup(syscall.SIGKILL)
	leftErr := cg.killAll(2 * time.Second)
	if why == nil {
		if msg := cg.passed(); msg != "" {
			why = errorf(ErrCapPassed, "%s; every process of the command killed", msg)
		}
	}
	restoreForeground(cmd)
	if why != nil && leftErr != nil {
		why = fmt.Errorf("%w; and %v", why, leftErr) // never silent on leftovers
	}
	if why != nil {
		return Status(why), why
	}
	if leftErr != nil {
		return StatusRefused, errorf(ErrRefused, "%v", leftErr)
	}
	return exitStatus(cmd.ProcessState, waitErr)
}

func exitStatus(ps *os.ProcessState, waitErr error) (int, error) {
	if ps == nil {
		return StatusRefused, errorf(ErrRefused, "wait for the command: %v", waitErr)
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.ExitCode(), nil
	}
	switch {
	case ws.Exited():
		return ws.ExitStatus(), nil
	case ws.Signaled():
		return 128 + int(ws.Signal()), nil
	}
	return StatusRefused, errorf(ErrRefused, "unexpected wait status %v", ws)
}

// hasControllingTerminal reports whether this process has a controlling
// terminal: /dev/tty opens only then (ENXIO otherwise).
func hasControllingTerminal() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// controllingPgrp reports whether f is this process's controlling terminal
// (TIOCGPGRP answers only on that one) and, if so, its foreground process
// group.
func controllingPgrp(f *os.File) (pgrp int, ctty bool) {
	if f == nil {
		return 0, false
	}
	pg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return pg, err == nil
}

// restoreForeground gives the terminal back to our process group after a
// command that had it (tcsetpgrp from a background group needs SIGTTOU
// ignored).
func restoreForeground(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Foreground {
		return
	}
	f, ok := cmd.Stdin.(*os.File)
	if !ok {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
}
