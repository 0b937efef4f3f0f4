package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/internal/version"
)

// Schema versions and file name suffixes, as Phobos's orchestrator has them.
const (
	ExerciseSchema = 2
	ExerciseSuffix = ".json"
	AbortedSuffix  = ".aborted.json"
	ConfigSuffix   = ".cfg"
)

// PrunerName is provenance.pruner in lockstep's records (Phobos writes
// "phobos layer pruner").
const PrunerName = "lockstep layer pruner"

// DateLayout is provenance.date's form: UTC, seconds, "Z".
const DateLayout = "2006-01-02T15:04:05Z"

// Stage is how far a prune went.
type Stage string

// The stages; only StageAll records a policy to ship.
const (
	StageFilesystem Stage = "filesystem"
	StageNetwork    Stage = "network"
	StageLimits     Stage = "limits"
	StageAll        Stage = "all"
)

func (s Stage) valid() bool {
	switch s {
	case StageFilesystem, StageNetwork, StageLimits, StageAll:
		return true
	}
	return false
}

// Provenance says where and when a record was made.
type Provenance struct {
	// Pruner is PrunerName.
	Pruner string `json:"pruner"`
	// Kernel is the kernel release (uname -r) and Architecture the machine
	// (uname -m).
	Kernel       string `json:"kernel"`
	Architecture string `json:"architecture"`
	// LandlockABI is the running kernel's Landlock ABI, -1 if none.
	LandlockABI int `json:"landlock_abi"`
	UID         int `json:"uid"`
	// Strace is the first line of `strace -V`, "absent" or "unknown".
	Strace string `json:"strace"`
	// Date is UTC in DateLayout.
	Date string `json:"date"`
	// RootDigest is the content digest of the root file system the record
	// was made on (internal/rootdigest: "sha256:" and 64 hex digits); empty
	// (absent) in records made before it was recorded.
	RootDigest string `json:"root_digest,omitempty"`
	// Lockstep is the version of the lockstep that made the record
	// (internal/version; `lockstep version`); absent in Phobos's records
	// and in lockstep's before it was recorded.
	Lockstep string `json:"lockstep,omitempty"`
}

// NewProvenance fills a Provenance for this machine at now. abi is the
// Landlock ABI the caller measured (-1 if none); strace is StraceVersion's
// answer.
func NewProvenance(now time.Time, abi int, strace string) Provenance {
	var u unix.Utsname
	kernel, arch := "unknown", "unknown"
	if unix.Uname(&u) == nil {
		kernel, arch = unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])
	}
	return Provenance{Pruner: PrunerName, Kernel: kernel, Architecture: arch, LandlockABI: abi,
		UID: os.Getuid(), Strace: strace, Date: now.UTC().Format(DateLayout), Lockstep: version.String()}
}

// StraceVersion is the first line of `strace -V`, "absent" when strace is not
// on PATH, "unknown" when it does not answer.
func StraceVersion(ctx context.Context) string {
	path, err := exec.LookPath("strace")
	if err != nil {
		return "absent"
	}
	out, err := exec.CommandContext(ctx, path, "-V").Output()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "unknown"
	}
	return line
}

// CfgHeader returns the header comment lines (without "# ") of a pruned
// policy for key/exercise, as Phobos writes them.
func CfgHeader(key, exercise string, stage Stage, p Provenance) []string {
	h := []string{
		fmt.Sprintf("Pruned by the %s for %s/%s on %s, stage %s.", p.Pruner, key, exercise, p.Date, stage),
		fmt.Sprintf("Kernel %s (%s), Landlock ABI %d, uid %d, %s.", p.Kernel, p.Architecture, p.LandlockABI, p.UID, p.Strace),
		"Every grant rests on a refusal the grading layers recorded, except the [connect] rules of the declared hosts; see the .json beside this file.",
	}
	if stage != StageAll {
		h = append(h, "Not verified jointly and not checked for containment: not a policy to ship.")
	}
	return h
}

// Policy is a policy as a record holds it: sets as sorted lists, as
// Phobos's records hold them.
type Policy struct {
	// FS maps a path to its sections, sorted ("execute", "read"). Readers
	// also take the canonical section order lockstep's records were written
	// in before (bases/path_sets).
	FS map[string][]string `json:"fs"`
	// Connect and Bind are canonical rows ("allow 127.0.0.1:*"), sorted.
	Connect []string `json:"connect"`
	Bind    []string `json:"bind"`
	// Limits maps a limit key to its value as the .cfg spells it.
	Limits   map[string]json.Number `json:"limits"`
	Comments map[string]string      `json:"comments"`
	Header   []string               `json:"header"`
	Notes    []string               `json:"notes"`
}

// FromPolicy converts a policy; notes are the trailing comment lines the
// pruner adds (nil for none). Every list and map is non-nil.
func FromPolicy(p *policy.Policy, notes []string) Policy {
	out := Policy{FS: map[string][]string{}, Connect: []string{}, Bind: []string{},
		Limits: map[string]json.Number{}, Comments: map[string]string{}, Header: []string{}, Notes: []string{}}
	if p == nil {
		return out
	}
	for path, secs := range p.FS {
		var list []string
		for _, s := range policy.FilesystemSections {
			if secs[s] {
				list = append(list, string(s))
			}
		}
		if len(list) > 0 {
			sort.Strings(list)
			out.FS[path] = list
		}
	}
	for _, r := range p.Connect {
		out.Connect = append(out.Connect, r.String())
	}
	for _, r := range p.Bind {
		out.Bind = append(out.Bind, r.String())
	}
	sort.Strings(out.Connect)
	sort.Strings(out.Bind)
	for k, l := range p.Limits {
		out.Limits[string(k)] = json.Number(l.Format(k))
	}
	for path, c := range p.Comments {
		out.Comments[path] = c
	}
	out.Header = append(out.Header, p.Header...)
	out.Notes = append(out.Notes, notes...)
	return out
}

// Entry is one entry of an exercise record's log: a "stage" naming its kind
// and the kind's fields.
type Entry struct {
	Stage string
	// Fields are the members other than "stage"; values are what
	// encoding/json makes of them (numbers as json.Number when read).
	Fields map[string]any
}

// NewEntry makes an entry of kind stage from fields, a struct or map that
// encodes to a JSON object (a "stage" member in it is overwritten).
func NewEntry(stage string, fields any) (Entry, error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return Entry{}, fmt.Errorf("log entry %q: %w", stage, err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	m := map[string]any{}
	if err := d.Decode(&m); err != nil {
		return Entry{}, fmt.Errorf("log entry %q: fields are not a JSON object: %w", stage, err)
	}
	delete(m, "stage")
	return Entry{Stage: stage, Fields: m}, nil
}

// MustEntry is NewEntry for fields known to encode (typed entries).
func MustEntry(stage string, fields any) Entry {
	e, err := NewEntry(stage, fields)
	if err != nil {
		panic(err)
	}
	return e
}

// Decode decodes the entry's fields into dst (a pointer to a typed entry).
func (e Entry) Decode(dst any) error {
	raw, err := json.Marshal(e.Fields)
	if err != nil {
		return fmt.Errorf("log entry %q: %w", e.Stage, err)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("log entry %q: %w", e.Stage, err)
	}
	return nil
}

// MarshalJSON writes the fields with "stage" among them.
func (e Entry) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Fields)+1)
	for k, v := range e.Fields {
		m[k] = v
	}
	m["stage"] = e.Stage
	return json.Marshal(m)
}

// UnmarshalJSON reads an object with a non-empty string "stage".
func (e *Entry) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return errors.New("a log entry is not a JSON object")
	}
	s, ok := m["stage"].(string)
	if !ok || s == "" {
		return errors.New(`a log entry has no "stage" string`)
	}
	delete(m, "stage")
	e.Stage, e.Fields = s, m
	return nil
}

// RunEntry is the log entry of one layered run; its Stage names the stage
// the run belongs to ("permissive", "filesystem", "network", "verification",
// …).
type RunEntry struct {
	// Run is the run's number within the prune, from 1.
	Run int `json:"run"`
	// Shape is the run shape (e.g. "OBSERVED_FILESYSTEM", "JOINT").
	Shape   string          `json:"shape"`
	Status  int             `json:"status"`
	Verdict verdict.Verdict `json:"verdict"`
	Seconds Seconds         `json:"seconds"`
}

// BaselineEntry is the log entry ("baseline") of one unsandboxed reference
// run.
type BaselineEntry struct {
	Attempt int             `json:"attempt"`
	Status  int             `json:"status"`
	Verdict verdict.Verdict `json:"verdict"`
}

// MinimisationEntry is the log entry ("<stage> minimisation") of a
// minimisation.
type MinimisationEntry struct {
	Before  int      `json:"before"`
	Kept    int      `json:"kept"`
	Trials  int      `json:"trials"`
	Runs    int      `json:"runs"`
	Removed []string `json:"removed"`
}

// ContainmentCheck is one check of the containment entry.
type ContainmentCheck struct {
	Name      string   `json:"name"`
	Arguments []string `json:"arguments"`
	// Control is what the check's run without any sandbox showed ("" when
	// the check has no control run).
	Control string `json:"control"`
	// Refused says the sandbox refused the probe, as it must.
	Refused bool `json:"refused"`
	// Unchecked says why the check could not run ("" when it ran).
	Unchecked string `json:"unchecked,omitempty"`
}

// ContainmentEntry is the log entry ("containment") of the containment
// checks.
type ContainmentEntry struct {
	Checks []ContainmentCheck `json:"checks"`
}
