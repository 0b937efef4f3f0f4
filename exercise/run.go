package exercise

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/internal/refns"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// DefaultTimeout is a run's hard limit when RunOptions names none.
const DefaultTimeout = 1800 * time.Second

// DefaultMaxOutput and MinOutput bound what is kept of each of stdout and
// stderr.
const (
	DefaultMaxOutput = 64 << 20
	MinOutput        = 1024
)

// DefaultPath is PATH in DefaultEnv.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Interpreter runs every exercise's build script (the exercise contract:
// /bin/bash ./build_script.sh).
const Interpreter = "/bin/bash"

// sentinelPrefix starts the line printed on stderr right before the build
// script starts.
const sentinelPrefix = "lockstep-exercise: the command starts "

// killGrace is how long a run's process group has between SIGTERM and
// SIGKILL when the run's time is up, and how long output pipes held open by
// leftovers are waited for.
const killGrace = 3 * time.Second

// DefaultEnv is the environment of a run when RunOptions.Env is nil: the
// standard PATH, a UTF-8 C locale, and HOME set to the working directory
// itself, so nothing a build writes "at home" lands outside it and runs on
// different machines see the same environment.
func DefaultEnv(workDir string) []string {
	return []string{"PATH=" + DefaultPath, "LANG=C.UTF-8", "HOME=" + workDir}
}

// RunOptions says how to run an exercise once.
type RunOptions struct {
	// WorkDir is the working directory: absolute, not "/", and not
	// overlapping the exercise folder. It is deleted and replaced by a
	// fresh copy of the exercise. Required (production: DefaultWorkDir).
	WorkDir string
	// CopyDir, if set, takes WorkDir's place as the fresh copy and where
	// the reports are read, for a command that sees it at WorkDir through
	// a bind mount of its own (package observer/lane, named in Prefix);
	// WorkDir must then exist and is left alone. The same rules hold.
	CopyDir string
	// Prefix is put before the command, e.g.
	// {"lockstep", "run", "--config", "p.cfg", "--"} or
	// {"strace", "-f", "-o", "trace", "--"}; nil runs the build script
	// directly. Prefix[0] is looked up in PATH of this process.
	Prefix []string
	// Env is the command's environment; nil means DefaultEnv(WorkDir).
	Env []string
	// Timeout is the run's hard limit; 0 means DefaultTimeout. When it
	// passes, the process group gets SIGTERM, then SIGKILL, and the run is
	// judged as timed out.
	Timeout time.Duration
	// MaxOutput caps each of stdout and stderr; 0 means DefaultMaxOutput,
	// and a value below MinOutput is raised to it (the sentinel line must
	// fit). What is cut is counted in Result.Dropped.
	MaxOutput int
	// Log receives progress at debug level; nil discards it.
	Log *slog.Logger
	// Started, if set, gets the pid of the process the run started, right
	// after it started (e.g. to measure that process tree alone).
	Started func(pid int)
	// Isolate, if set, runs the command (prefix and all) in namespaces of
	// its own (package internal/refns): an unsandboxed run as root then
	// cannot change what this process reads or writes after it, nor
	// outlive it.
	Isolate *Isolation
}

// Isolation is how a run is isolated (RunOptions.Isolate).
type Isolation struct {
	// Program serves the role refns.Verb (lockstep, or a test binary that
	// does), opened with refns.Open before any run: the run cannot replace
	// what is executed.
	Program *os.File
	// ReadOnly are the paths the run sees read-only besides the kernel's
	// and the system's own (e.g. a guest's /run/lockstep: this program,
	// its inputs, its results).
	ReadOnly []string
	// Writable are paths below ReadOnly the run may write all the same
	// (e.g. a lane's copy in a read-only scratch directory).
	Writable []string
}

// Result is what one run of an exercise showed.
type Result struct {
	// Command is the argv that ran, prefix included.
	Command []string
	// Status is the exit status; death by signal N is 128+N; a timeout is
	// verdict.TimeoutStatus.
	Status   int
	TimedOut bool
	// Started says the sentinel line appeared on stderr, i.e. the prefix
	// let the command start and bash began running the build script.
	Started bool
	// Stdout and Stderr are the two streams; Log is both, interleaved in
	// the order they were read.
	Stdout, Stderr, Log []byte
	// Dropped counts bytes cut by MaxOutput.
	Dropped int64
	// Duration is from start to exit of the command (not the clean-up).
	Duration time.Duration
	// MaxRSSKiB is the peak resident set of the largest process of the
	// run the runner waited for (the command, or a descendant it reaped),
	// in KiB: getrusage's ru_maxrss; 0 where unknown.
	MaxRSSKiB int64
	// Reports are the JUnit files the run left where the report globs
	// point, sorted by path.
	Reports []verdict.Report
	// Verdict judges status, log and reports.
	Verdict verdict.Verdict

	sentinel string
}

// BeforeStart returns the part of the log before the sentinel line: what the
// prefix printed before the command started (all of the log if it never
// started). Package verdict's callers read a prefix's own refusal from it.
func (r *Result) BeforeStart() []byte {
	if i := bytes.Index(r.Log, []byte(r.sentinel)); i >= 0 {
		return r.Log[:i]
	}
	return r.Log
}

// Run runs the exercise once: a fresh copy in opts.WorkDir, the build script
// behind opts.Prefix, then the reports and the verdict. The error is for the
// runner's own failures (bad options, a copy that failed, a prefix that
// could not be started); whatever the command does is in the Result.
func (e *Exercise) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	opts = opts.withDefaults()
	if err := e.checkWorkDir(opts.WorkDir); err != nil {
		return nil, err
	}
	copyDir := opts.WorkDir
	if opts.CopyDir != "" {
		if err := e.checkWorkDir(opts.CopyDir); err != nil {
			return nil, err
		}
		copyDir = opts.CopyDir
	}
	if err := FreshCopy(e.Dir, copyDir); err != nil {
		return nil, err
	}
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, fmt.Errorf("run %s: sentinel: %w", e.Stem(), err)
	}
	sentinel := sentinelPrefix + hex.EncodeToString(token[:])
	argv := append(append([]string{}, opts.Prefix...),
		Interpreter, "-c", `printf '%s\n' "$1" >&2; exec /bin/bash "./$2"`, "lockstep-exercise", sentinel, e.Script)

	p, err := e.start(argv, opts)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", e.Stem(), err)
	}
	if opts.Started != nil {
		opts.Started(p.cmd.Process.Pid)
	}
	waitErr := p.wait(ctx, opts.Timeout)
	p.drain(opts.Log, e.Stem())
	if ctx.Err() != nil && !p.timedOut.Load() {
		return nil, fmt.Errorf("run %s: %w", e.Stem(), ctx.Err())
	}

	res := &Result{Command: argv, sentinel: sentinel, Duration: p.duration}
	res.Status = exitStatus(p.cmd.ProcessState, waitErr)
	if ru, ok := sysUsage(p.cmd.ProcessState); ok {
		res.MaxRSSKiB = ru.Maxrss
	}
	if p.timedOut.Load() {
		res.TimedOut, res.Status = true, verdict.TimeoutStatus
	}
	capt := p.capt
	res.Stdout, res.Stderr, res.Log, res.Dropped = capt.stdout.Bytes(), capt.stderr.Bytes(), capt.log.Bytes(), capt.dropped
	res.Started = bytes.Contains(res.Stderr, []byte(sentinel))
	res.Reports, err = CollectReports(copyDir, e.ReportGlobs())
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", e.Stem(), err)
	}
	res.Verdict = verdict.Judge(verdict.Run{Status: res.Status, TimedOut: res.TimedOut, Log: res.Log, Reports: res.Reports})
	opts.Log.Debug("exercise run done", "exercise", e.Stem(), "status", res.Status, "class", res.Verdict.ExitClass,
		"tests", len(res.Verdict.Tests), "seconds", res.Duration.Seconds())
	return res, nil
}

// withDefaults fills in the zero fields that stand for a default.
func (opts RunOptions) withDefaults() RunOptions {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	opts.MaxOutput = max(opts.MaxOutput, MinOutput)
	if opts.Env == nil {
		opts.Env = DefaultEnv(opts.WorkDir)
	}
	return opts
}

// runProcess is one started run: the command, leader of its own process
// group, and the readers of its output.
type runProcess struct {
	cmd        *exec.Cmd
	outR, errR *os.File
	capt       *capture
	readers    sync.WaitGroup
	start      time.Time
	// duration is from start to the command's exit; timedOut is set when
	// the run's time was up.
	duration time.Duration
	timedOut atomic.Bool
}

// start starts argv in opts.WorkDir in a process group of its own, stdin
// /dev/null, its stdout and stderr read into a capture.
func (e *Exercise) start(argv []string, opts RunOptions) (*runProcess, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	// The child gets its own copy of stdin when it starts.
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	p := &runProcess{outR: outR, errR: errR, capt: &capture{max: opts.MaxOutput}}
	p.readers.Add(2)
	go func() { defer p.readers.Done(); p.capt.read(outR, &p.capt.stdout) }()
	go func() { defer p.readers.Done(); p.capt.read(errR, &p.capt.stderr) }()

	p.cmd = &exec.Cmd{
		Path:        path,
		Args:        argv,
		Env:         opts.Env,
		Dir:         opts.WorkDir,
		Stdin:       stdin,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if opts.Isolate != nil {
		err = refns.Wrap(p.cmd, opts.Isolate.Program, opts.Isolate.ReadOnly, opts.Isolate.Writable)
	}
	if err == nil {
		opts.Log.Debug("exercise run", "exercise", e.Stem(), "dir", opts.WorkDir, "argv", p.cmd.Args)
		p.start = time.Now()
		err = p.cmd.Start()
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		p.readers.Wait()
		return nil, startError(err, opts.Isolate != nil)
	}
	return p, nil
}

// startError says what an isolated run needs when it could not start.
func startError(err error, isolated bool) error {
	if isolated {
		return fmt.Errorf("%w; %s", err, refns.Hint)
	}
	return err
}

// wait waits for the command to exit and returns Wait's error. When
// timeout passes (timedOut is set) or ctx ends first, the process group
// gets SIGTERM, then SIGKILL after killGrace. Whatever the run left in its
// group is killed once the command has exited.
func (p *runProcess) wait(ctx context.Context, timeout time.Duration) error {
	pgid := p.cmd.Process.Pid
	done := make(chan struct{})
	go func() {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-done:
			return
		case <-timer.C:
			p.timedOut.Store(true)
		case <-ctx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(killGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err := p.cmd.Wait()
	p.duration = time.Since(p.start)
	close(done)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return err
}

// drain waits for the output readers to reach the end of the pipes, or
// for killGrace when something outside the run's group holds them open,
// then stops reading.
func (p *runProcess) drain(log *slog.Logger, stem string) {
	waited := make(chan struct{})
	go func() { p.readers.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(killGrace):
		log.Warn("exercise run: a process outside the run's group keeps its output open", "exercise", stem)
		p.outR.Close()
		p.errR.Close()
		<-waited
	}
	p.outR.Close()
	p.errR.Close()
}

// sysUsage is ps's resource usage, if it was waited for.
func sysUsage(ps *os.ProcessState) (*syscall.Rusage, bool) {
	if ps == nil {
		return nil, false
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	return ru, ok
}

func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// capture keeps stdout, stderr and their interleaving, each stream capped.
type capture struct {
	mu                  sync.Mutex
	max                 int
	stdout, stderr, log bytes.Buffer
	dropped             int64
}

func (c *capture) read(r io.Reader, own *bytes.Buffer) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.mu.Lock()
			keep := min(n, c.max-own.Len())
			if keep < 0 {
				keep = 0
			}
			own.Write(buf[:keep])
			c.log.Write(buf[:keep])
			c.dropped += int64(n - keep)
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// CollectReports reads every file under workDir that globs match. A report
// that cannot be read, is not a regular file, or is larger than
// verdict.MaxReportBytes carries its error (and counts as unreadable).
func CollectReports(workDir string, globs []string) ([]verdict.Report, error) {
	paths, err := MatchReports(workDir, globs)
	if err != nil {
		return nil, err
	}
	var out []verdict.Report
	for _, p := range paths {
		r := verdict.Report{Path: p}
		full := filepath.Join(workDir, filepath.FromSlash(p))
		st, err := os.Lstat(full)
		switch {
		case err != nil:
			r.Err = err
		case !st.Mode().IsRegular():
			r.Err = fmt.Errorf("%s is %s, not a report file", p, safefile.Kind(st.Mode()))
		case st.Size() > verdict.MaxReportBytes:
			r.Err = fmt.Errorf("%s is %d bytes, more than %d", p, st.Size(), verdict.MaxReportBytes)
		default:
			r.Data, r.Err = safefile.ReadFile(full, verdict.MaxReportBytes)
		}
		out = append(out, r)
	}
	return out, nil
}

// checkWorkDir refuses a working directory the runner must not delete.
func (e *Exercise) checkWorkDir(dir string) error {
	if dir == "" {
		return errors.New("run: no working directory given")
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("run: working directory %q is not an absolute, clean path", dir)
	}
	if dir == "/" || filepath.Dir(dir) == "/" {
		return fmt.Errorf("run: working directory %q is / or a top-level directory; everything in it is deleted before every run", dir)
	}
	if overlaps(dir, e.Dir) {
		return fmt.Errorf("run: working directory %q overlaps the exercise %q; everything in it is deleted before every run", dir, e.Dir)
	}
	return nil
}

func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+string(filepath.Separator)) || strings.HasPrefix(b, a+string(filepath.Separator))
}

// FreshCopy deletes what dst holds and copies the tree src to it: folders,
// regular files (with their modes and modification times) and symbolic
// links as links, never followed. Any other kind
// of file is refused. dst's parent is created if missing.
//
// A directory at dst is emptied, not removed: the observer's lanes bind
// copies of their own over the working directory in mount namespaces of
// their own, and removing a mount point takes the mounts on it away in
// every namespace, so a fresh copy for a run beside them must leave the
// directory itself in place. Anything else at dst (a link, a file) is
// removed.
func FreshCopy(src, dst string) error {
	if err := emptyOut(dst); err != nil {
		return fmt.Errorf("fresh copy: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("fresh copy: %w", err)
	}
	type dirTime struct {
		path string
		mod  time.Time
		perm fs.FileMode
	}
	var dirs []dirTime
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := mkdirOrKeep(target, rel == ".", mode.Perm()|0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{target, info.ModTime(), mode.Perm()})
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case mode.IsRegular():
			return copyFile(p, target, info)
		default:
			return fmt.Errorf("%s is %s; an exercise holds only folders, files and links", p, safefile.Kind(mode))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fresh copy of %s: %w", src, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].perm); err != nil {
			return fmt.Errorf("fresh copy of %s: %w", src, err)
		}
		_ = os.Chtimes(dirs[i].path, dirs[i].mod, dirs[i].mod)
	}
	return nil
}

// emptyOut empties the directory dst, or removes whatever else is there.
func emptyOut(dst string) error {
	fi, err := os.Lstat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || !fi.IsDir() {
		return os.RemoveAll(dst)
	}
	ents, err := os.ReadDir(dst)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// mkdirOrKeep makes the directory target, or, for the copy's top (kept by
// emptyOut), gives the one there perm.
func mkdirOrKeep(target string, top bool, perm fs.FileMode) error {
	if top {
		if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
			return os.Chmod(target, perm)
		}
	}
	return os.Mkdir(target, perm)
}

func copyFile(src, dst string, info fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(dst, info.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(dst, info.ModTime(), info.ModTime())
}
