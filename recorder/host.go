package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Statuses of Run and Check.
const (
	StatusOK            = 0
	StatusFail          = 1
	StatusIndeterminate = 3
	StatusGuestSetup    = 70
)

// guestExercise is where the exercise is shared in the guest.
const guestExercise = proto.ShareDir + "/exercise"

// RunOptions configure Run.
type RunOptions struct {
	// Recording is the recording's directory (D/N); the session is added
	// under it.
	Recording string
	// Exercise is copied into WorkDir before the session ("" none).
	Exercise string
	// Script is the session's script text.
	Script string
	// Terminal, if set, makes the session interactive (Script must be
	// ""): typed by hand on the user's terminal, passed through to the
	// program's terminal in the guest, until the program exits.
	Terminal *Passthrough
	Command  []string
	// Sample measures the session's process tree for [limits]
	// (GuestOptions.Sample).
	Sample bool
	// Kernel is the bzImage the guest boots.
	Kernel string
	harness.Sizing
	// Stderr receives the guest's output as it arrives (nil discards).
	Stderr  io.Writer
	Verbose bool
	Log     *slog.Logger
}

// RunResult is one recorded session.
type RunResult struct {
	// Status is StatusOK, StatusFail (the script did not finish),
	// StatusIndeterminate (the guest did not report) or StatusGuestSetup.
	Status int
	Reason string
	// Session is the session's directory; Record its session.json.
	Session string
	Record  *SessionRecord
	Guest   *harness.Result
}

// CheckCommand refuses a command whose words name the guest's own lockstep
// binary, its share and results directories, or the role variable: the
// recorded program runs unsandboxed, and must not play one of lockstep's
// hidden parts.
func CheckCommand(argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command to record")
	}
	for _, w := range argv {
		for _, bad := range []string{proto.EnvRole, proto.GuestBinary, proto.ShareDir, proto.ResultsDir, "/run/lockstep"} {
			if strings.Contains(w, bad) {
				return fmt.Errorf("the command word %q names %s, one of lockstep's own files or roles; record a program, not lockstep's parts", w, bad)
			}
		}
	}
	return nil
}

// Run records one session in a fresh guest and adds it to the recording.
// The recorded program runs unsandboxed inside the guest.
func Run(ctx context.Context, opts RunOptions) (*RunResult, error) {
	if err := CheckCommand(opts.Command); err != nil {
		return nil, err
	}
	if _, err := ParseScript(strings.NewReader(opts.Script)); err != nil {
		return nil, err
	}
	if opts.Terminal != nil && opts.Script != "" {
		return nil, errors.New("record: a session is scripted or typed by hand, not both")
	}
	results, err := os.MkdirTemp("", "lockstep-record-results.")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(results)
	hopts, err := recordGuest(opts, results)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if opts.Terminal != nil {
		in, sctx, stop, err := opts.Terminal.start(ctx)
		if err != nil {
			return nil, fmt.Errorf("record: the terminal: %w", err)
		}
		defer stop()
		ctx, hopts.Input, hopts.Stdout = sctx, in, opts.Terminal.Out
	}
	g, err := harness.Run(ctx, hopts)
	if g == nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	res := &RunResult{Guest: g}
	if err != nil {
		res.Status, res.Reason = StatusIndeterminate, err.Error()
		if errors.Is(err, harness.ErrGuestSetup) {
			res.Status = StatusGuestSetup
		}
		return res, nil
	}
	if res.Record, err = ReadSession(results); err != nil || g.Status != 0 {
		res.Status, res.Reason = StatusIndeterminate, fmt.Sprintf("the guest exited %d without a session (%v)", g.Status, err)
		return res, nil
	}
	if res.Session, err = keepSession(opts.Recording, results); err != nil {
		return nil, err
	}
	if why := res.Record.Failed(); why != "" {
		res.Status, res.Reason = StatusFail, why
	}
	return res, nil
}

// recordGuest is Run's guest: the role GuestRole with the exercise shared
// read-only.
func recordGuest(opts RunOptions, results string) (harness.Options, error) {
	digest, err := rootdigest.Of(rootdigest.RootOr(opts.Root))
	if err != nil {
		return harness.Options{}, err
	}
	hopts := harness.Options{Kernel: opts.Kernel, Stdout: opts.Stderr, Stderr: opts.Stderr, ResultsDir: results,
		ForensicsDir: harness.TempForensicsDir(results), Verbose: opts.Verbose, Log: opts.Log}
	opts.Sizing.Apply(&hopts)
	gopts := GuestOptions{Command: opts.Command, Script: opts.Script, RootDigest: digest, Out: proto.ResultsDir, Sample: opts.Sample}
	if opts.Terminal != nil {
		gopts.Interactive = true
		gopts.Rows, gopts.Cols = opts.Terminal.window()
	}
	if opts.Exercise != "" {
		abs, err := filepath.Abs(opts.Exercise)
		if err != nil {
			return harness.Options{}, err
		}
		hopts.Shares = []harness.Share{{Source: abs, GuestPath: guestExercise}}
		gopts.Exercise = guestExercise
	}
	return hopts, hopts.SetRole(GuestRole, gopts)
}

// keepSession copies a session's files from the results into the next
// session directory of the recording.
func keepSession(rec, results string) (string, error) {
	dir, err := nextSessionDir(rec)
	if err != nil {
		return "", err
	}
	for _, f := range []string{SessionFile, TraceFile, TranscriptFile} {
		b, err := safefile.ReadFile(filepath.Join(results, f), maxTrace)
		if err != nil {
			return "", err
		}
		if err := safefile.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// maxTrace bounds a session file read back (a long session's trace).
const maxTrace = 1 << 30
