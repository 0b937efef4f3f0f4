package recorder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/derive/limits"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// GuestRole is the registered role of run's guest side: the job of the
// guest Run boots, reading its GuestOptions from the job.
const GuestRole = "record-guest"

// GuestOptions configure RecordHere; as JSON they are the guest's job.
type GuestOptions struct {
	Command []string `json:"command"`
	// Exercise is copied into WorkDir first ("" an empty WorkDir).
	Exercise string `json:"exercise,omitempty"`
	// Script is the session's script text.
	Script string `json:"script"`
	// RootDigest is the host's digest of the guest's root.
	RootDigest string `json:"root_digest"`
	// Out receives the session's files.
	Out string `json:"out"`
	// Interactive: no script; the session is typed through
	// proto.InputPort and the program's terminal is this command's
	// standard output, until the program exits.
	Interactive bool `json:"interactive,omitempty"`
	// Sample: measure the session's process tree for [limits]
	// (limits.Sampler, as the layer pruner does).
	Sample bool `json:"sample,omitempty"`
	// Rows and Cols are an interactive session's first window size.
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// sessionEnv is the recorded command's environment: the exercises' own,
// with a terminal type.
func sessionEnv() []string {
	return append(exercise.DefaultEnv(WorkDir), "TERM=xterm")
}

// RecordHere records one session on this machine (a guest): the exercise
// copied into WorkDir, the starting state listed, the command run under
// strace on a pseudo-terminal (scripted, or typed through the input port)
// with no sandbox, its process tree sampled if asked, and the session's
// files written to opts.Out.
func RecordHere(ctx context.Context, opts GuestOptions) (*SessionRecord, error) {
	sc, err := ParseScript(strings.NewReader(opts.Script))
	if err != nil {
		return nil, err
	}
	if err := prepareWorkDir(opts.Exercise); err != nil {
		return nil, err
	}
	start, err := listStart(opts.RootDigest)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	trace := filepath.Join(opts.Out, TraceFile)
	sess := Session{Argv: strace.Command(trace, opts.Command...), Dir: WorkDir, Env: sessionEnv(), Script: sc}
	if opts.Interactive {
		in, err := openPort(proto.InputPort)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		sess.Input, sess.Output, sess.Window = in, os.Stdout, unix.Winsize{Row: opts.Rows, Col: opts.Cols}
	}
	var smp *limits.Sampler
	if opts.Sample {
		smp = limits.StartTree("", straceExe())
		sess.OnStart = smp.Watch
	}
	started := time.Now()
	res, err := RunSession(ctx, sess)
	// The session is over: the tree is measured, whatever follows fails.
	var m limits.Measurement
	if smp != nil {
		m = smp.Stop()
	}
	if err != nil {
		return nil, err
	}
	rec := &SessionRecord{Schema: SessionSchema, Command: opts.Command, Exercise: opts.Exercise, Script: opts.Script, WorkDir: WorkDir,
		Interactive: opts.Interactive, Status: res.Status, HungUp: res.HungUp, Seconds: res.Seconds, KernelRelease: release(), Start: *start}
	if res.ScriptErr != nil {
		rec.ScriptError = res.ScriptErr.Error()
	}
	if rec.Existed, rec.Uses, rec.TerminalIoctls, err = judgeExisted(trace, res.TTY, start, started); err != nil {
		return nil, err
	}
	if smp != nil {
		m.WallSeconds, m.LargestFileMB = res.Seconds, largestWrittenMB(rec.Uses, started)
		rec.Limits = &m
	}
	return rec, writeSession(opts.Out, rec, res.Transcript)
}

// straceExe is strace's resolved path, the process the sampler leaves
// out of the tree (as the pruner leaves out the enforcer); "" counts it.
func straceExe() string {
	p, err := exec.LookPath("strace")
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// largestWrittenMB is the largest regular file modified since started in a
// directory the session wrote in: limits.LargestFileMB over the parents
// of the session's write-class objects (the root itself never walked).
func largestWrittenMB(uses []Use, started time.Time) float64 {
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{}}
	for _, u := range uses {
		for _, n := range u.Needs {
			for _, s := range n.Sections {
				if dir := path.Dir(n.Path); policy.IsWriteClass(policy.Section(s)) && dir != "/" {
					p.FS[dir] = map[policy.Section]bool{policy.Section(s): true}
				}
			}
		}
	}
	return limits.LargestFileMB(p, started)
}

// openPort opens the virtio-serial port named name for reading, found by
// its name in sysfs (a guest has no udev to make /dev/virtio-ports links).
func openPort(name string) (*os.File, error) {
	ports, err := proto.Ports()
	if err != nil {
		return nil, fmt.Errorf("the virtio-serial port %s: %w", name, err)
	}
	if dev, ok := ports[name]; ok {
		return os.Open(dev)
	}
	return nil, fmt.Errorf("the virtio-serial port %s is not in %s (%d ports): the host gave no input channel", name, proto.PortClass, len(ports))
}

func prepareWorkDir(ex string) error {
	if ex == "" {
		if err := os.RemoveAll(WorkDir); err != nil {
			return err
		}
		return os.MkdirAll(WorkDir, 0o755)
	}
	return exercise.FreshCopy(ex, WorkDir)
}

// listStart lists every entry under ListedRoots.
func listStart(rootDigest string) (*StartState, error) {
	st := &StartState{RootDigest: rootDigest, Entries: []Entry{}}
	for _, r := range ListedRoots {
		err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			st.Entries = append(st.Entries, Entry{Path: p, Dir: d.IsDir()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list the starting state: %w", err)
		}
	}
	st.ListDigest = listDigest(st.Entries)
	return st, nil
}

// listDigest is SHA-256 over "<d|f> <path>\n" of each entry in path order.
func listDigest(es []Entry) string {
	s := append([]Entry(nil), es...)
	sort.Slice(s, func(i, j int) bool { return s[i].Path < s[j].Path })
	h := sha256.New()
	for _, e := range s {
		k := "f"
		if e.Dir {
			k = "d"
		}
		fmt.Fprintf(h, "%s %s\n", k, e.Path)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// beforeLstat answers what a path was before the session: from the
// listing under ListedRoots; elsewhere (the recorded root, read-only
// beneath the guest's overlay) a path that exists now and was born
// (statx btime, else ctime) before the session started.
func beforeLstat(start *StartState, started time.Time) func(string) (fs.FileInfo, error) {
	listed := existedMap(start.Entries)
	return func(p string) (fs.FileInfo, error) {
		if inListed(p) {
			e, ok := listed[p]
			if !ok {
				return nil, fs.ErrNotExist
			}
			return entryInfo(e), nil
		}
		var st unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_CTIME|unix.STATX_TYPE, &st); err != nil {
			return nil, fs.ErrNotExist
		}
		born := st.Ctime
		if st.Mask&unix.STATX_BTIME != 0 {
			born = st.Btime
		}
		if !time.Unix(born.Sec, int64(born.Nsec)).Before(started) {
			return nil, fs.ErrNotExist
		}
		return entryInfo(Entry{Path: p, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}), nil
	}
}

// judgeExisted parses the trace into its uses (without the ioctls on the
// session's terminal tty, which it counts) and records, for every path
// they need and each ancestor, whether it existed before the session.
func judgeExisted(trace, tty string, start *StartState, started time.Time) ([]Entry, []Use, int, error) {
	tr, err := strace.ParseFileLenient(trace)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("the session's trace: %w", err)
	}
	lstat := beforeLstat(start, started)
	seen := map[string]bool{}
	out := []Entry{}
	uses, dropped := dropTerminalIoctls(attribute.Uses(tr.Calls, attribute.Options{Lstat: lstat, Resolve: attribute.ResolveSymlinks}), tty)
	uses = withInterpreters(uses)
	for _, u := range uses {
		for _, n := range u.Needs {
			for p := n.Path; !seen[p]; p = path.Dir(p) {
				seen[p] = true
				if fi, err := lstat(p); err == nil {
					out = append(out, Entry{Path: p, Dir: fi.IsDir()})
				}
				if p == "/" || p == "." {
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, usesOf(uses, serverNames(tr.Calls)), dropped, nil
}

// withInterpreters adds to every execute what the kernel also opens for
// execution (a script's interpreter, an ELF file's loader), as the
// control replay (evidence/control) does: no trace line shows those opens, yet
// Landlock checks [execute] on them.
func withInterpreters(uses []*attribute.Refusal) []*attribute.Refusal {
	for i, u := range uses {
		w := control.WithInterpreter(u)
		for j := range w.Needs {
			w.Needs[j].Path = attribute.ResolveSymlinks(w.Needs[j].Path)
		}
		uses[i] = w
	}
	return uses
}

// dropTerminalIoctls removes the ioctls on the session's own terminal
// through the standard descriptors (0, 1, 2): those are inherited, opened
// outside any domain, and Landlock takes a descriptor's ioctl right from
// the domain it was opened in, so no policy refuses them. The terminal
// opened again (/dev/tty) is another matter: that descriptor is opened
// inside the domain, and its ioctls stay.
func dropTerminalIoctls(uses []*attribute.Refusal, tty string) ([]*attribute.Refusal, int) {
	out, n := uses[:0], 0
	for _, u := range uses {
		if u.Op == "ioctl" && u.Call != nil && len(u.Call.Args) > 0 {
			if fd, ok := u.Call.Args[0].FD(); ok && fd.Num >= 0 && fd.Num <= 2 && fd.Path == tty {
				n++
				continue
			}
		}
		out = append(out, u)
	}
	return out, n
}

func writeSession(dir string, rec *SessionRecord, transcript []byte) error {
	b, err := marshal(rec)
	if err != nil {
		return err
	}
	if err := safefile.WriteFile(filepath.Join(dir, TranscriptFile), transcript, 0o644); err != nil {
		return err
	}
	return safefile.WriteFile(filepath.Join(dir, SessionFile), b, 0o644)
}

func release() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
