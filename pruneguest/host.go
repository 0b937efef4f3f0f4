package pruneguest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/record"
)

// Where a guest sees the prune's read-only inputs.
const (
	guestExercises = proto.ShareDir + "/exercises"
	guestSeeds     = proto.ShareDir + "/seeds"
)

// HostOptions configures Host.
type HostOptions struct {
	// Key, Exercises, Only and Found are as in GuestOptions.
	Key       string
	Exercises string
	Only      string
	Found     []exercise.Found
	// Out receives each exercise's policy and record, copied from its
	// guest; it is prepared (as GuestOptions.Out) only once a guest has
	// reported.
	Out string
	// Seeds is the host directory of the seed files prune.json may name,
	// shared read-only; "" is the seeds shipped with lockstep.
	Seeds string
	// SkipContainment and CheckMinimality are as in prune.Options.
	SkipContainment bool
	CheckMinimality bool
	// Quiet asks the guests for no progress lines (GuestOptions.Quiet).
	Quiet bool
	// Kernel is the bzImage every guest boots; Boot its modules and
	// machine (a distribution kernel's).
	Kernel string
	Boot   harness.Boot
	// Sizing is each guest's (Root: the guest's root, its digest the
	// records' provenance.root_digest).
	harness.Sizing
	// Stdout receives the guests' consoles (nil discards them), Stderr
	// their progress.
	Stdout, Stderr io.Writer
	Verbose        bool
	Log            *slog.Logger
	// Done, when set, is called as each exercise's guest ends.
	Done func(Outcome)
}

// Host prunes each exercise in a fresh guest (Guest, the role GuestRole,
// with Only naming it) and copies what the guest wrote into Out. Its status
// is the highest of the exercises' (Outcome.Status); an error means no
// guest was booted.
func Host(ctx context.Context, opts HostOptions) (int, error) {
	found, err := guestFound(GuestOptions{Key: opts.Key, Exercises: opts.Exercises, Only: opts.Only, Found: opts.Found})
	if err != nil {
		return 0, err
	}
	job, err := newHostJob(opts)
	if err != nil {
		return 0, err
	}
	out := &outDir{dir: opts.Out, key: opts.Key, clean: opts.Only == ""}
	status := 0
	for i, f := range found {
		logInfo(opts.Log, fmt.Sprintf("%s_%s: exercise %d of %d, in a fresh guest", f.Key, f.Name, i+1, len(found)))
		o := job.prune(ctx, f, out)
		status = max(status, o.Status)
		if opts.Done != nil {
			opts.Done(o)
		}
	}
	return status, nil
}

// hostJob is what every guest of a Host shares: the harness options and
// the guest side's options, Only left to each exercise.
type hostJob struct {
	harness harness.Options
	guest   GuestOptions
}

func newHostJob(opts HostOptions) (*hostJob, error) {
	exAbs, err := filepath.Abs(opts.Exercises)
	if err != nil {
		return nil, err
	}
	// The guest's root is hashed here, where it is a plain directory.
	digest, err := rootdigest.Of(rootdigest.RootOr(opts.Root))
	if err != nil {
		return nil, err
	}
	j := &hostJob{
		harness: harness.Options{Kernel: opts.Kernel, Shares: []harness.Share{{Source: exAbs, GuestPath: guestExercises}},
			Stdout: opts.Stdout, Stderr: opts.Stderr, Verbose: opts.Verbose, Log: opts.Log},
		guest: GuestOptions{Key: opts.Key, Exercises: guestExercises, Out: proto.ResultsDir, RootDigest: digest,
			SkipContainment: opts.SkipContainment, CheckMinimality: opts.CheckMinimality, Quiet: opts.Quiet},
	}
	opts.Sizing.Apply(&j.harness)
	opts.Boot.Apply(&j.harness)
	if opts.Seeds != "" {
		s, err := filepath.Abs(opts.Seeds)
		if err != nil {
			return nil, err
		}
		j.harness.Shares = append(j.harness.Shares, harness.Share{Source: s, GuestPath: guestSeeds})
		j.guest.SeedDir = guestSeeds
	}
	return j, nil
}

// prune prunes f in a fresh guest and copies its results into out.
func (j *hostJob) prune(ctx context.Context, f exercise.Found, out *outDir) Outcome {
	o := Outcome{Key: f.Key, Exercise: f.Name, Status: 1}
	dir, err := os.MkdirTemp("", "lockstep-prune-guest.")
	if err != nil {
		o.Err = err
		return o
	}
	defer os.RemoveAll(dir)
	hopts, gopts := j.harness, j.guest
	hopts.ResultsDir, gopts.Only = dir, f.Name
	if o.Err = hopts.SetRole(GuestRole, gopts); o.Err != nil {
		return o
	}
	res, err := harness.Run(ctx, hopts)
	if res == nil {
		o.Err = err
		return o
	}
	if err != nil {
		o.Status = 3
		if errors.Is(err, harness.ErrGuestSetup) {
			o.Status = 70
		}
		o.Err = fmt.Errorf("%s_%s: guest on %s: %w", f.Key, f.Name, filepath.Base(j.harness.Kernel), err)
		return o
	}
	switch o.Status, o.Err = copyResults(dir, out, f.Key+"_"+f.Name); {
	case o.Err != nil:
	case o.Status == 3:
		o.Err = fmt.Errorf("%s_%s: the guest exited %d and wrote no policy or record", f.Key, f.Name, res.Status)
	case res.Status != 0:
		o.Status = 1
	}
	return o
}

// copyResults copies the exercise's policy, record and abort record (stem
// plus each suffix) from the guest's results into out, preparing out first:
// only now, with a guest's results in hand, so that a prune no guest could
// run (no QEMU, KVM asked for and unusable) leaves the earlier artefacts
// where they were. Its status is 0, 1 (out could not be written) or 3 (the
// guest's results could not be read, or held none).
func copyResults(dir string, out *outDir, stem string) (int, error) {
	if err := out.prepare(); err != nil {
		return 1, err
	}
	copied := 0
	for _, suf := range []string{record.ConfigSuffix, record.ExerciseSuffix, record.AbortedSuffix} {
		b, err := safefile.ReadFile(filepath.Join(dir, stem+suf), 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 3, err
		}
		if err := safefile.WriteFile(filepath.Join(out.dir, stem+suf), b, 0o644); err != nil {
			return 1, err
		}
		copied++
	}
	if copied == 0 {
		return 3, nil
	}
	return 0, nil
}
