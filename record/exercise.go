package record

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Exercise is the exercise record <key>_<exercise>.json (schema 2): what a
// prune produced and every step that led there.
type Exercise struct {
	SchemaVersion int        `json:"schema_version"`
	Key           string     `json:"key"`
	Exercise      string     `json:"exercise"`
	Stage         Stage      `json:"stage"`
	Provenance    Provenance `json:"provenance"`
	// CfgSHA256 is SHA256Hex of the .cfg written beside the record, header
	// included.
	CfgSHA256 string  `json:"cfg_sha256"`
	Policy    Policy  `json:"policy"`
	Log       []Entry `json:"log"`
}

// Aborted is <key>_<exercise>.aborted.json: a prune that wrote no policy.
type Aborted struct {
	SchemaVersion int    `json:"schema_version"`
	Key           string `json:"key"`
	Exercise      string `json:"exercise"`
	Stage         Stage  `json:"stage"`
	// Aborted is the reason, one line.
	Aborted string `json:"aborted"`
	// Evidence holds what shows the reason; "record" is the log up to the
	// abort.
	Evidence   map[string]any `json:"evidence"`
	Provenance Provenance     `json:"provenance"`
}

// ValidationError lists every problem of one record file, sorted.
type ValidationError struct {
	File     string
	Problems []string
}

func (e *ValidationError) Error() string {
	s := e.File + ": " + e.Problems[0]
	if len(e.Problems) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(e.Problems)-1)
	}
	return s
}

var (
	keyPattern      = lazyre.New(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	hexPattern      = lazyre.New(`^[0-9a-f]{64}$`)
	exerciseNameBad = lazyre.New(`[/\x00-\x1f\x7f]`)
)

// Problems collects a record's validation problems, so a reader reports
// every one at once. The record types of other packages (the KVM record)
// validate with it too.
type Problems []string

// Add appends one problem.
func (p *Problems) Add(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

// Err returns the problems, sorted, as a *ValidationError naming file; nil
// when there are none.
func (p Problems) Err(file string) error {
	if len(p) == 0 {
		return nil
	}
	sort.Strings(p)
	return &ValidationError{File: file, Problems: p}
}

// CheckIdentity adds a problem for a schema version other than wantSchema,
// a key that is not a key, and an exercise that is not a folder name.
func CheckIdentity(p *Problems, schema, wantSchema int, key, exercise string) {
	if schema != wantSchema {
		p.Add("schema_version is %d, want %d", schema, wantSchema)
	}
	if !keyPattern.MatchString(key) {
		p.Add("key %q is not a key (^[a-z0-9]+(-[a-z0-9]+)*$)", key)
	}
	if exercise == "" || exercise == "." || exercise == ".." || strings.HasPrefix(exercise, ".") || exerciseNameBad.MatchString(exercise) {
		p.Add("exercise %q is not an exercise folder name", exercise)
	}
}

// CheckProvenance adds a problem for each provenance member that is
// missing or malformed.
func CheckProvenance(p *Problems, v Provenance) {
	if v.Pruner == "" {
		p.Add("provenance.pruner is empty")
	}
	if v.Kernel == "" {
		p.Add("provenance.kernel is empty")
	}
	if v.Architecture == "" {
		p.Add("provenance.architecture is empty")
	}
	if v.LandlockABI < -1 {
		p.Add("provenance.landlock_abi is %d, want -1 (none) or more", v.LandlockABI)
	}
	if v.Strace == "" {
		p.Add("provenance.strace is empty, want the first line of strace -V, absent or unknown")
	}
	if _, err := time.Parse(DateLayout, v.Date); err != nil {
		p.Add("provenance.date %q is not a UTC date like 2026-11-29T08:44:42Z", v.Date)
	}
	if v.RootDigest != "" && !rootdigest.Valid(v.RootDigest) {
		p.Add("provenance.root_digest %q is not sha256:<64 lower-case hex digits>", v.RootDigest)
	}
}

func checkPolicy(p *Problems, v Policy) {
	if v.FS == nil || v.Connect == nil || v.Bind == nil || v.Limits == nil || v.Comments == nil || v.Header == nil || v.Notes == nil {
		p.Add("policy lacks one of fs, connect, bind, limits, comments, header, notes")
	}
	for path, secs := range v.FS {
		if !strings.HasPrefix(path, "/") {
			p.Add("policy.fs path %q is not absolute", path)
		}
		checkSections(p, path, secs)
	}
	for _, r := range v.Connect {
		if !strings.HasPrefix(r, "allow ") {
			p.Add("policy.connect rule %q does not start with allow", r)
		}
	}
	for _, r := range v.Bind {
		if !strings.HasPrefix(r, "allow ") {
			p.Add("policy.bind rule %q does not start with allow", r)
		}
	}
	if !sort.StringsAreSorted(v.Connect) || !sort.StringsAreSorted(v.Bind) {
		p.Add("policy.connect and policy.bind must be sorted")
	}
	for k, n := range v.Limits {
		if !knownLimit(k) {
			p.Add("policy.limits has key %q, want one of %v", k, policy.LimitKeys)
		}
		if f, err := n.Float64(); err != nil || f < 0 {
			p.Add("policy.limits[%q] is %q, want a number ≥ 0", k, n)
		}
	}
}

// checkSections refuses a path's section list unless every section is known
// and the list is sorted, or in canonical section order (lockstep's records
// before they were sorted), without repeats.
func checkSections(p *Problems, path string, secs []string) {
	if len(secs) == 0 {
		p.Add("policy.fs[%q] has no section", path)
		return
	}
	rank := map[string]int{}
	for i, s := range policy.FilesystemSections {
		rank[string(s)] = i
	}
	sorted, canonical := true, true
	for i, s := range secs {
		if _, ok := rank[s]; !ok {
			p.Add("policy.fs[%q] has section %q, want one of %v", path, s, policy.FilesystemSections)
			return
		}
		if i > 0 {
			sorted = sorted && secs[i-1] < s
			canonical = canonical && rank[secs[i-1]] < rank[s]
		}
	}
	if !sorted && !canonical {
		p.Add("policy.fs[%q] sections %v are not sorted without repeats", path, secs)
	}
}

func knownLimit(k string) bool {
	for _, l := range policy.LimitKeys {
		if string(l) == k {
			return true
		}
	}
	return false
}

// Validate returns every problem of the record at once (nil if none).
func (r *Exercise) Validate() error {
	var p Problems
	CheckIdentity(&p, r.SchemaVersion, ExerciseSchema, r.Key, r.Exercise)
	if !r.Stage.valid() {
		p.Add("stage %q is not one of filesystem, network, limits, all", r.Stage)
	}
	CheckProvenance(&p, r.Provenance)
	if !hexPattern.MatchString(r.CfgSHA256) {
		p.Add("cfg_sha256 %q is not a lower-case hex SHA-256", r.CfgSHA256)
	}
	checkPolicy(&p, r.Policy)
	if r.Log == nil {
		p.Add("log is missing, want a list (possibly empty)")
	}
	for i, e := range r.Log {
		if e.Stage == "" {
			p.Add("log[%d] has no stage", i)
		}
	}
	return p.Err(r.Key + "_" + r.Exercise + ExerciseSuffix)
}

// Vouches reports whether the record describes cfg: its SHA-256 over the raw
// bytes must be CfgSHA256.
func (r *Exercise) Vouches(cfg []byte) error {
	if got := SHA256Hex(cfg); got != r.CfgSHA256 {
		stem := r.Key + "_" + r.Exercise
		return fmt.Errorf("%s.cfg is not the file %s.json records: its SHA-256 differs (file %s, record %s)", stem, stem, got, r.CfgSHA256)
	}
	return nil
}

// Shippable reports whether the record is one an orchestrator may merge:
// stage all.
func (r *Exercise) Shippable() error {
	if r.Stage != StageAll {
		return fmt.Errorf("%s_%s.json records a prune stopped after its %s stage, not one to ship", r.Key, r.Exercise, r.Stage)
	}
	return nil
}

// Validate returns every problem of the abort record at once (nil if none).
func (r *Aborted) Validate() error {
	var p Problems
	CheckIdentity(&p, r.SchemaVersion, ExerciseSchema, r.Key, r.Exercise)
	if !r.Stage.valid() {
		p.Add("stage %q is not one of filesystem, network, limits, all", r.Stage)
	}
	if strings.TrimSpace(r.Aborted) == "" || strings.ContainsAny(r.Aborted, "\n\r") {
		p.Add("aborted %q is not a one-line reason", r.Aborted)
	}
	if r.Evidence == nil {
		p.Add("evidence is missing, want an object")
	}
	CheckProvenance(&p, r.Provenance)
	return p.Err(r.Key + "_" + r.Exercise + AbortedSuffix)
}

// ParseExercise reads and validates an exercise record.
func ParseExercise(name string, data []byte) (*Exercise, error) {
	var r Exercise
	if err := DecodeStrict(data, &r); err != nil {
		return nil, &ValidationError{File: name, Problems: []string{err.Error()}}
	}
	if err := r.Validate(); err != nil {
		return nil, rename(err, name)
	}
	return &r, nil
}

// ParseAborted reads and validates an abort record.
func ParseAborted(name string, data []byte) (*Aborted, error) {
	var r Aborted
	if err := DecodeStrict(data, &r); err != nil {
		return nil, &ValidationError{File: name, Problems: []string{err.Error()}}
	}
	if err := r.Validate(); err != nil {
		return nil, rename(err, name)
	}
	return &r, nil
}

// IsSHA256Hex reports whether s is a lower-case hex SHA-256, as [SHA256Hex]
// writes it.
func IsSHA256Hex(s string) bool { return hexPattern.MatchString(s) }

// Validator is a record that lists its own problems.
type Validator interface{ Validate() error }

// ParseInto decodes data into r strictly (no unknown member, nothing after
// the value) and validates it; every error names the file name.
func ParseInto(name string, data []byte, r Validator) error {
	if err := DecodeStrict(data, r); err != nil {
		return &ValidationError{File: name, Problems: []string{err.Error()}}
	}
	return rename(r.Validate(), name)
}

func rename(err error, name string) error {
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.File = name
	}
	return err
}

// CheckName refuses a record whose file name is not <key>_<exercise><suffix>.
func CheckName(path, key, exercise, suffix string) error {
	if want := key + "_" + exercise + suffix; filepath.Base(path) != want {
		return &ValidationError{File: path, Problems: []string{fmt.Sprintf("records %s/%s, so its name must be %s", key, exercise, want)}}
	}
	return nil
}

// ReadExercise reads path, validates it, and checks that its name is
// <key>_<exercise>.json.
func ReadExercise(path string) (*Exercise, error) {
	data, err := safefile.ReadFile(path, 0)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	r, err := ParseExercise(path, data)
	if err != nil {
		return nil, err
	}
	return r, CheckName(path, r.Key, r.Exercise, ExerciseSuffix)
}

// ReadAborted reads path, validates it, and checks its name.
func ReadAborted(path string) (*Aborted, error) {
	data, err := safefile.ReadFile(path, 0)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	r, err := ParseAborted(path, data)
	if err != nil {
		return nil, err
	}
	return r, CheckName(path, r.Key, r.Exercise, AbortedSuffix)
}

// WriteExercise validates r and writes it atomically as
// dir/<key>_<exercise>.json, returning the path.
func WriteExercise(dir string, r *Exercise) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	return Write(dir, r.Key+"_"+r.Exercise+ExerciseSuffix, r)
}

// WriteAborted validates r and writes it atomically as
// dir/<key>_<exercise>.aborted.json, returning the path.
func WriteAborted(dir string, r *Aborted) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	return Write(dir, r.Key+"_"+r.Exercise+AbortedSuffix, r)
}

// Write marshals v as [Marshal] does and writes it atomically as dir/name,
// returning the path; v is validated by its caller.
func Write(dir, name string, v any) (string, error) {
	data, err := Marshal(v)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := safefile.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	return path, nil
}
