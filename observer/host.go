package observer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
)

// RunJSONSchema is the version of run.json.
const RunJSONSchema = 1

// Guest paths of the host's inputs.
const (
	guestExercises = proto.ShareDir + "/exercises"
	guestPathSets  = proto.ShareDir + "/path-sets"
)

// HostOptions configures Host, the host side of `lockstep observe`.
type HostOptions struct {
	Key       string
	Exercises string
	// PathSets holds the default prune's records on input and receives the
	// .abi10 files, observe.json and run.json.
	PathSets string
	// Kernel is the bzImage; Pin names it in run.json ("" for a file).
	Kernel string
	Pin    string
	// Boot is the kernel's modules and machine (a distribution kernel's).
	Boot harness.Boot
	// WantABI is the pin's Landlock ABI; WantRelease the release the
	// bzImage names.
	WantABI     int
	WantRelease string
	// Sizing is the guest's.
	harness.Sizing
	// TCGTimeFactor is GuestOptions.TCGTimeFactor: under TCG the exercise
	// runs' timeout and cpu limits are multiplied by it; 0 is
	// DefaultTCGTimeFactor.
	TCGTimeFactor int
	// Stderr receives the guest's progress as it arrives.
	Stderr  io.Writer
	Verbose bool
	Log     *slog.Logger
}

// HostResult is what Host found.
type HostResult struct {
	// Status is 0 every exercise verified, 1 one failed, 3 indeterminate,
	// 70 the guest could not be set up.
	Status  int
	Reason  string
	Summary *Summary
	Run     *harness.Result
	// Files are the files unpacked into PathSets.
	Files []string
}

// RunJSON is run.json: where and how the observer ran.
type RunJSON struct {
	Schema          int             `json:"schema"`
	Key             string          `json:"key"`
	Status          int             `json:"status"`
	Reason          string          `json:"reason,omitempty"`
	Lockstep        string          `json:"lockstep"`
	KernelPin       string          `json:"kernel_pin,omitempty"`
	KernelRelease   string          `json:"kernel_release"`
	BzImageSHA256   string          `json:"bzimage_sha256"`
	ConfigSHA256    string          `json:"config_sha256,omitempty"`
	InitramfsSHA256 string          `json:"initramfs_sha256"`
	QEMUVersion     string          `json:"qemu_version"`
	Accel           string          `json:"accel"`
	AccelReason     string          `json:"accel_reason"`
	CPU             string          `json:"cpu"`
	VCPUs           int             `json:"vcpus"`
	MemMB           int             `json:"mem_mb"`
	Timings         harness.Timings `json:"timings"`
	// TimeFactor is the factor the exercise runs' timeout and cpu limits
	// were multiplied by in the guest: 1 under KVM, the TCG factor under
	// TCG. Always written, so a reader need not know the convention of
	// observe.json and the sidecars (absent: 1).
	TimeFactor int `json:"time_factor"`
	// Audit are the guest collector's counters; Exercises each exercise's
	// account (observe.json).
	Audit     *AuditCounters    `json:"audit,omitempty"`
	Exercises []ExerciseSummary `json:"exercises"`
	// Schedule is the guest's event log of the steps that ran beside one
	// another (observe.json's schedule).
	Schedule []schedule.Event `json:"schedule,omitempty"`
	// Artefacts name the files of this run next to run.json (ConsoleFile,
	// AuditRawFile, KernelConfigFile), those that exist.
	Artefacts []string `json:"artefacts"`
	Seconds   float64  `json:"seconds"`
}

// Host is the observer's host side: it boots the kernel with the observer's
// guest side (Guest, the role GuestRole) as the guest's job, the exercises
// and path sets shared read-only, streams its progress, and unpacks its
// results into PathSets. A status of 0 holds only if every exercise of the
// key has its .abi10.json.
func Host(ctx context.Context, opts HostOptions) (*HostResult, error) {
	start := time.Now()
	found, err := hostExercises(opts)
	if err != nil {
		return nil, err
	}
	results, err := os.MkdirTemp("", "lockstep-observe-results.")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(results)
	hopts, err := guestRun(opts, results)
	if err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	if err := clearArtefacts(opts.PathSets); err != nil {
		return nil, err
	}
	run, err := harness.Run(ctx, hopts)
	res := &HostResult{Run: run}
	if run == nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	// An earlier run's .abi10 files must not outlive this run: after an
	// indeterminate run they would vouch for what was not observed now.
	if cerr := clearStale(opts.PathSets, opts.Key); cerr != nil {
		return nil, fmt.Errorf("observe: %w", cerr)
	}
	if err != nil {
		res.guestFailed(err)
		return res, writeRunJSON(opts, res, results, start)
	}
	res.Status = run.Status
	if res.Status != StatusVerified && res.Status != StatusFailed {
		res.Status, res.Reason = StatusIndeterminate, fmt.Sprintf("the guest observer exited %d", run.Status)
	}
	res.Summary = readSummary(results)
	matched := res.Summary != nil && res.Summary.Status == run.Status
	if res.Status == StatusIndeterminate {
		return res, res.indeterminate(opts, results, matched, start)
	}
	if !matched {
		res.Status, res.Reason = StatusIndeterminate, fmt.Sprintf("the guest exited %d without a matching %s", run.Status, SummaryFile)
		return res, writeRunJSON(opts, res, results, start)
	}
	if res.Files, err = unpack(results, opts.PathSets, opts.Key); err != nil {
		return nil, err
	}
	if res.Status == StatusVerified {
		res.checkRecords(found, results)
	}
	return res, writeRunJSON(opts, res, results, start)
}

// indeterminate finishes a run the guest ended with 3: the guest's reason,
// and an inconclusive exercise's record and the trace of its stopped run,
// which are kept but vouch for nothing (verified: false).
func (res *HostResult) indeterminate(opts HostOptions, results string, matched bool, start time.Time) error {
	if res.Summary != nil && res.Summary.Reason != "" {
		res.Reason = res.Summary.Reason
	}
	var err error
	if matched && len(res.Summary.Exercises) > 0 {
		res.Files, err = unpack(results, opts.PathSets, opts.Key)
	}
	return errors.Join(err, writeRunJSON(opts, res, results, start))
}

// hostExercises checks the host's directories and finds the key's
// exercises, refusing a key that has none.
func hostExercises(opts HostOptions) ([]exercise.Found, error) {
	for _, d := range []string{opts.Exercises, opts.PathSets} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("observe: %s is not a directory", d)
		}
	}
	found, err := exercise.ForKey(opts.Exercises, opts.Key)
	if err != nil {
		return nil, fmt.Errorf("observe: %w", err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("observe: no exercise for key %q under %s", opts.Key, opts.Exercises)
	}
	return found, nil
}

// guestFailed notes a guest run that did not finish: indeterminate, or 70
// when the guest could not be set up.
func (res *HostResult) guestFailed(err error) {
	res.Status, res.Reason = StatusIndeterminate, err.Error()
	if errors.Is(err, harness.ErrGuestSetup) {
		res.Status = 70
	}
}

// readSummary is the guest's SummaryFile in results, nil when it is
// missing or not of SummarySchema.
func readSummary(results string) *Summary {
	b, err := safefile.ReadFile(filepath.Join(results, SummaryFile), 0)
	if err != nil {
		return nil
	}
	var s Summary
	if json.Unmarshal(b, &s) != nil || s.Schema != SummarySchema {
		return nil
	}
	return &s
}

// checkRecords makes a verified result indeterminate when an exercise of
// found has no .abi10.json in results.
func (res *HostResult) checkRecords(found []exercise.Found, results string) {
	for _, f := range found {
		name := f.Key + "_" + f.Name + ".abi10.json"
		if _, err := os.Stat(filepath.Join(results, name)); err != nil {
			res.Status, res.Reason = StatusIndeterminate, fmt.Sprintf("the guest reported status 0 but %s is missing", name)
		}
	}
}

// guestRun is the guest run of Host: the guest observer (GuestRole) reading
// the exercises and path sets from 9P shares and writing to results.
func guestRun(opts HostOptions, results string) (harness.Options, error) {
	exAbs, _ := filepath.Abs(opts.Exercises)
	psAbs, _ := filepath.Abs(opts.PathSets)
	// The guest's root is hashed here, where it is a plain directory; in
	// the guest it is a 9p share under an overlay, far slower to read.
	digest, err := rootdigest.Of(rootdigest.RootOr(opts.Root))
	if err != nil {
		return harness.Options{}, err
	}
	hopts := harness.Options{
		Kernel: opts.Kernel,
		Shares: []harness.Share{{Source: exAbs, GuestPath: guestExercises}, {Source: psAbs, GuestPath: guestPathSets}},
		Stdout: opts.Stderr, Stderr: opts.Stderr, ResultsDir: results, Verbose: opts.Verbose, Log: opts.Log,
		ConsoleFile: filepath.Join(opts.PathSets, ConsoleFile), ForensicsDir: opts.PathSets,
	}
	opts.Sizing.Apply(&hopts)
	opts.Boot.Apply(&hopts)
	err = hopts.SetRole(GuestRole, GuestOptions{Key: opts.Key, Exercises: guestExercises, PathSets: guestPathSets,
		Out: proto.ResultsDir, WantABI: opts.WantABI, WantRelease: opts.WantRelease, RootDigest: digest,
		AuditRaw: path.Join(proto.ResultsDir, AuditRawFile), OneCPU: true, TCGTimeFactor: opts.TCGTimeFactor,
		Lanes: max(hopts.CPUs, 1)})
	return hopts, err
}

// clearStale removes the key's .abi10 files (record, sidecar, trace) from dir.
func clearStale(dir, key string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, key+"_") && strings.Contains(n, ".abi10.") {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// unpack copies the observer's files (the key's .abi10 files and
// observe.json) from the results into dir, atomically each.
func unpack(results, dir, key string) ([]string, error) {
	ents, err := os.ReadDir(results)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !(n == SummaryFile || strings.HasPrefix(n, key+"_") && strings.Contains(n, ".abi10.")) {
			continue
		}
		b, err := safefile.ReadFile(filepath.Join(results, n), 0)
		if err != nil {
			return nil, err
		}
		if err := safefile.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return nil, err
		}
		files = append(files, n)
	}
	return files, nil
}

// clearArtefacts removes an earlier run's artefacts from dir: they describe
// this run or none, and an earlier console must not pass for this one's.
func clearArtefacts(dir string) error {
	for _, n := range artefactFiles {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("observe: %w", err)
		}
	}
	return nil
}

// keepArtefacts copies the raw audit log (when the guest's results came
// back) and the kernel's configuration (when the kernel has one beside it)
// next to run.json, and names every artefact present there.
func keepArtefacts(opts HostOptions, results string) ([]string, error) {
	for src, dst := range map[string]string{
		filepath.Join(results, AuditRawFile):               AuditRawFile,
		filepath.Join(filepath.Dir(opts.Kernel), "config"): KernelConfigFile,
	} {
		b, err := safefile.ReadFile(src, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = safefile.WriteFile(filepath.Join(opts.PathSets, dst), b, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("observe: %w", err)
		}
	}
	names := []string{}
	for _, n := range artefactFiles {
		if _, err := os.Stat(filepath.Join(opts.PathSets, n)); err == nil {
			names = append(names, n)
		}
	}
	return names, nil
}

func writeRunJSON(opts HostOptions, res *HostResult, results string, start time.Time) error {
	artefacts, err := keepArtefacts(opts, results)
	if err != nil {
		return err
	}
	r := res.Run
	doc := RunJSON{Schema: RunJSONSchema, Key: opts.Key, Status: res.Status, Reason: res.Reason, Lockstep: r.Lockstep, KernelPin: opts.Pin,
		KernelRelease: r.KernelRelease, BzImageSHA256: r.KernelSHA256, InitramfsSHA256: r.InitramfsSHA256,
		QEMUVersion: r.QEMUVersion, Accel: r.Accel, AccelReason: r.AccelReason, CPU: r.CPU, VCPUs: r.CPUs, MemMB: r.MemMB,
		Timings: r.Timings, Exercises: []ExerciseSummary{}, Artefacts: artefacts, Seconds: time.Since(start).Seconds(),
		TimeFactor: harness.TimeFactor(r.Accel, opts.TCGTimeFactor)}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(opts.Kernel), "config")); err == nil {
		sum := sha256.Sum256(b)
		doc.ConfigSHA256 = hex.EncodeToString(sum[:])
	}
	if s := res.Summary; s != nil {
		doc.Audit, doc.Exercises, doc.Schedule = &s.Audit, s.Exercises, s.Schedule
		if s.TimeFactor > 1 {
			doc.TimeFactor = s.TimeFactor // the guest's word over the host's
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(filepath.Join(opts.PathSets, "run.json"), append(b, '\n'), 0o644)
}
