package pruneguest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
	"github.com/lockstep-sandbox/lockstep/pruner/prune"
	"github.com/lockstep-sandbox/lockstep/record"
)

// GuestRole is the registered role (proto.EnvRole) of the prune's guest
// side: the job of each guest Host boots, reading its GuestOptions from the
// job (proto.OptionsFile).
const GuestRole = "prune-guest"

// GuestOptions configures Guest; as JSON it is the job the host side hands
// each guest.
type GuestOptions struct {
	// Key and Exercises (the testing root) name the exercises; Only, when
	// set, keeps the one of that folder name.
	Key       string `json:"key"`
	Exercises string `json:"exercises"`
	Only      string `json:"only,omitempty"`
	// Found, when set, is used instead of discovering the exercises.
	Found []exercise.Found `json:"-"`
	// Out receives each exercise's policy and record (or abort record); a
	// prune of the whole key (no Only) first removes the key's earlier ones.
	Out string `json:"out"`
	// SeedDir, WorkDir, SkipContainment and CheckMinimality are as in
	// prune.Options.
	SeedDir         string `json:"seed_dir,omitempty"`
	WorkDir         string `json:"work_dir,omitempty"`
	SkipContainment bool   `json:"skip_containment,omitempty"`
	CheckMinimality bool   `json:"check_minimality,omitempty"`
	// Quiet asks for no progress lines, only warnings and results.
	Quiet bool `json:"quiet,omitempty"`
	// RootDigest is provenance.root_digest of the records, the digest of
	// the root the prune runs on; "" takes the digest of / here.
	RootDigest string `json:"root_digest,omitempty"`
	// Enforcer is prune.Options.Enforcer.
	Enforcer []string `json:"-"`
	// Log receives progress; nil discards it.
	Log *slog.Logger `json:"-"`
	// Done, when set, is called as each exercise ends.
	Done func(Outcome) `json:"-"`
}

// Outcome is how one exercise's prune ended.
type Outcome struct {
	Key, Exercise string
	// Status is 0 a policy, 1 the exercise aborted (or the host could not
	// keep its result), 3 its guest did not report, 70 its guest could not
	// be set up.
	Status int
	// Err says why, on the host side, an exercise has no trustworthy result.
	Err error
	// Result and Paths (the files written) are Guest's.
	Result *prune.Result
	Paths  []string
	Took   time.Duration
}

// Guest prunes each exercise on this machine, which must be disposable
// (prune.Disposable), and writes the results into Out. Its status is 0
// when every exercise has a policy, 1 when one aborted; an error stops it.
func Guest(ctx context.Context, opts GuestOptions) (int, error) {
	found, err := guestFound(opts)
	if err != nil {
		return 0, err
	}
	if err := prune.Disposable(); err != nil {
		return 0, err
	}
	if opts.RootDigest == "" {
		if opts.RootDigest, err = rootdigest.Of("/"); err != nil {
			return 0, err
		}
	} else if !rootdigest.Valid(opts.RootDigest) {
		return 0, fmt.Errorf("root digest %q: want sha256:<64 lower-case hex digits>", opts.RootDigest)
	}
	out := &outDir{dir: opts.Out, key: opts.Key, clean: opts.Only == ""}
	if err := out.prepare(); err != nil {
		return 0, err
	}
	popts := prune.Options{Enforcer: opts.Enforcer, WorkDir: opts.WorkDir, SeedDir: opts.SeedDir, SkipContainment: opts.SkipContainment,
		CheckMinimality: opts.CheckMinimality, RootDigest: opts.RootDigest, Log: opts.Log}
	status := 0
	for i, f := range found {
		logInfo(opts.Log, fmt.Sprintf("%s_%s: exercise %d of %d", f.Key, f.Name, i+1, len(found)))
		o, err := pruneOne(ctx, f, popts, opts.Out)
		if err != nil {
			return 0, err
		}
		status = max(status, o.Status)
		if opts.Done != nil {
			opts.Done(o)
		}
	}
	return status, nil
}

// guestFound is opts.Found, else the key's exercises under opts.Exercises
// (the one named Only, if set).
func guestFound(opts GuestOptions) ([]exercise.Found, error) {
	if opts.Found != nil {
		return opts.Found, nil
	}
	found, err := exercise.ForKey(opts.Exercises, opts.Key)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no exercise of key %q under %s", opts.Key, opts.Exercises)
	}
	if opts.Only == "" {
		return found, nil
	}
	return exercise.Named(found, opts.Only)
}

// pruneOne prunes one exercise and writes its result into out; an exercise
// that does not meet the contract is an abort, not an error.
func pruneOne(ctx context.Context, f exercise.Found, opts prune.Options, out string) (Outcome, error) {
	start := time.Now()
	ex, err := exercise.Read(f)
	var res *prune.Result
	if err != nil {
		res = refused(ctx, f, err, opts.RootDigest)
	} else if res, err = prune.Prune(ctx, ex, opts); err != nil {
		return Outcome{}, fmt.Errorf("%s_%s: %w", f.Key, f.Name, err)
	}
	paths, err := res.Write(out)
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{Key: f.Key, Exercise: f.Name, Result: res, Paths: paths, Took: time.Since(start)}
	if res.Aborted != nil {
		o.Status = 1
	}
	return o, nil
}

// refused is the abort of an exercise that does not meet the contract.
func refused(ctx context.Context, f exercise.Found, err error, rootDigest string) *prune.Result {
	prov := record.NewProvenance(time.Now(), -1, record.StraceVersion(ctx))
	prov.RootDigest = rootDigest
	return &prune.Result{Key: f.Key, Exercise: f.Name, Aborted: &record.Aborted{
		SchemaVersion: record.ExerciseSchema, Key: f.Key, Exercise: f.Name, Stage: record.StageAll,
		Aborted:    strings.ReplaceAll(err.Error(), "\n", "; "),
		Evidence:   map[string]any{"record": []any{}},
		Provenance: prov,
	}}
}

// outDir is the prune's output directory: made if missing and, for a prune
// of the whole key, rid of the key's earlier artefacts, once (prepare).
type outDir struct {
	dir, key string
	clean    bool
	prepared bool
}

func (o *outDir) prepare() error {
	if o.prepared {
		return nil
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if o.clean {
		if err := clean(o.dir, o.key); err != nil {
			return err
		}
	}
	o.prepared = true
	return nil
}

// clean removes a key's stale artefacts from out (its *.cfg and *.json),
// so none of an earlier prune is mistaken for this one's; the KVM run's
// records stay.
func clean(out, key string) error {
	for _, pat := range []string{"*.cfg", "*.json"} {
		ms, err := filepath.Glob(filepath.Join(out, key+"_"+pat))
		if err != nil {
			return err
		}
		for _, m := range ms {
			if strings.HasSuffix(m, kvmrecord.Suffix) || strings.HasSuffix(m, kvmrecord.ConfigSuffix) {
				continue
			}
			if err := os.Remove(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// logInfo logs a progress line, if there is a logger.
func logInfo(log *slog.Logger, msg string) {
	if log != nil {
		log.Info(msg)
	}
}

// Line is how the exercise's prune ended, as `lockstep prune` prints it:
// its policy or abort where it was pruned, or on the host the reason a
// guest's exercise has no result (the guest printed the rest); "" for
// nothing to say.
func (o Outcome) Line() string {
	switch res := o.Result; {
	case o.Err != nil:
		return o.Err.Error()
	case res == nil:
		return ""
	case res.Aborted != nil:
		return fmt.Sprintf("%s_%s: aborted: %s (%s)", o.Key, o.Exercise, res.Aborted.Aborted, o.Paths[0])
	}
	return fmt.Sprintf("%s_%s: %s in %s, %s (%s)", o.Key, o.Exercise, o.Result.Policy.Hash(),
		cli.Plural(o.Result.TotalRuns(), "run"), o.Took.Round(time.Second), strings.Join(o.Paths, ", "))
}
