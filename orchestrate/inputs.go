package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Record schemas and suffixes (Phobos's orchestrate.py constants).
const (
	LayerRecordSchema = 2               // <key>_<ex>.json
	ABI10RecordSchema = 1               // <key>_<ex>.abi10.json
	ABI10Landlock     = landlock.ABIUDP // the Landlock ABI that enforces UDP rules

	abortedSuffix = ".aborted.json"
	abi10JSON     = ".abi10.json"
	abi10CFG      = ".abi10.cfg"
	retiredSuffix = ".paths"
)

var (
	keyRE      = lazyre.New(`^[a-z0-9-]+$`)
	exerciseRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// ValidKey reports whether k can name a language: it ends up in file names
// and on a kernel command line (Phobos: ^[a-z0-9-]+$).
func ValidKey(k string) bool { return keyRE.MatchString(k) }

// exercise is one checked input.
type exercise struct {
	lang, name, stem string
	cfg              []byte
	cfgSHA           string
	pol              *policy.Policy
	rows             []policy.BindRule // from the ABI-10 sidecar, if any
	remainder        *policy.Policy    // what the exercise needs beyond its base
}

// problems collects refusal reasons in order.
type problems []string

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

// listDir returns the names of the regular files of dir (nil if dir is missing).
func listDir(dir string, probs *problems) map[string]bool {
	out := map[string]bool{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			probs.add("%s does not exist; want the directory of the pruner's results", dir)
		} else {
			probs.add("cannot list %s: %v", dir, err)
		}
		return out
	}
	for _, e := range ents {
		if isFile(dir, e) {
			out[e.Name()] = true
		}
	}
	return out
}

// isFile reports whether the entry e of dir is a regular file or a link to
// one (CI steps copy with links): the files an input directory offers.
func isFile(dir string, e fs.DirEntry) bool {
	switch {
	case e.Type().IsRegular():
		return true
	case e.Type()&fs.ModeSymlink != 0:
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		return err == nil && fi.Mode().IsRegular()
	}
	return false
}

// sha is the hex SHA-256 of data, as records carry it.
func sha(data []byte) string { return strings.TrimPrefix(policy.FileSHA256(data), "sha256:") }

// sameDigest compares a record's digest with a hex digest. Records may spell
// it as Phobos does (64 hex digits) or as lockstep's FileSHA256 does
// ("sha256:" + 64 hex digits); nothing else matches.
func sameDigest(recorded any, hex string) bool {
	s, ok := recorded.(string)
	if !ok {
		return false
	}
	return strings.TrimPrefix(s, "sha256:") == hex
}

// readRecord reads a JSON object; numbers stay json.Number. typed, when not
// nil, is the record struct whose field types every member must have
// (checkFieldTypes).
func readRecord(path string, typed any) (map[string]any, error) {
	data, err := safefile.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("is not JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("holds more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("is not a JSON object")
	}
	if typed != nil {
		if err := checkFieldTypes(data, typed); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func intField(m map[string]any, k string) (int64, bool) {
	n, ok := m[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

func fieldText(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprint(v)
	}
}

// checkLanguage checks every artefact of lang in pathDir (and its ABI-10
// files in kvmDir, or in pathDir when kvmDir is ""), returning the usable
// exercises sorted by stem.
func checkLanguage(lang, pathDir, kvmDir string, names, kvmNames map[string]bool, probs *problems) []*exercise {
	prefix := lang + "_"
	var stems []string
	seen := map[string]bool{}
	var sorted []string
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			sorted = append(sorted, n)
		}
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		switch {
		case strings.HasSuffix(n, abortedSuffix):
			reason := "no reason recorded"
			if m, err := readRecord(filepath.Join(pathDir, n), nil); err != nil {
				reason = "its record " + err.Error()
			} else if s, ok := m["aborted"].(string); ok {
				reason = s
			}
			probs.add("%s was aborted: %s", strings.TrimSuffix(n, abortedSuffix), reason)
		case strings.HasSuffix(n, retiredSuffix):
			probs.add("%s is a retired Bubblewrap path set; remove it", n)
		case strings.HasSuffix(n, abi10JSON), strings.HasSuffix(n, abi10CFG):
			if kvmDir != "" {
				probs.add("%s is in the path directory while a KVM directory is given; pass the observer's results one way", n)
			}
		case strings.HasSuffix(n, ".json"):
			stem := strings.TrimSuffix(n, ".json")
			if !names[stem+".cfg"] {
				probs.add("%s.json has no %s.cfg beside it", stem, stem)
			}
		case strings.HasSuffix(n, ".cfg"):
			stem := strings.TrimSuffix(n, ".cfg")
			if !seen[stem] {
				seen[stem] = true
				stems = append(stems, stem)
			}
		}
	}
	abiDir, abiNames := pathDir, names
	if kvmDir != "" {
		abiDir, abiNames = kvmDir, kvmNames
	}
	// ABI-10 stems: every <lang>_*.abi10.{json,cfg} of the ABI directory.
	abiStems := map[string]bool{}
	for n := range abiNames {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		if s, ok := strings.CutSuffix(n, abi10JSON); ok {
			abiStems[s] = true
		}
		if s, ok := strings.CutSuffix(n, abi10CFG); ok {
			abiStems[s] = true
		}
	}

	var out []*exercise
	for _, stem := range stems {
		ex := checkExercise(lang, stem, pathDir, names, probs)
		if ex == nil {
			continue
		}
		out = append(out, ex)
	}
	byStem := map[string]*exercise{}
	for _, ex := range out {
		byStem[ex.stem] = ex
	}
	var abiSorted []string
	for s := range abiStems {
		abiSorted = append(abiSorted, s)
	}
	sort.Strings(abiSorted)
	for _, stem := range abiSorted {
		checkABI10(lang, stem, pathDir, abiDir, names, abiNames, byStem[stem], probs)
	}
	return out
}

// checkExercise checks <stem>.cfg against its record; nil if unusable.
func checkExercise(lang, stem, dir string, names map[string]bool, probs *problems) *exercise {
	name := strings.TrimPrefix(stem, lang+"_")
	if !exerciseRE.MatchString(name) {
		probs.add("%s.cfg: exercise name %q is not letters, digits, '.', '_' and '-'", stem, name)
		return nil
	}
	if !names[stem+".json"] {
		probs.add("%s.cfg has no %s.json beside it", stem, stem)
		return nil
	}
	cfg, err := safefile.ReadFile(filepath.Join(dir, stem+".cfg"), policy.MaxFileBytes)
	if err != nil {
		probs.add("%s.cfg cannot be read: %v", stem, err)
		return nil
	}
	rec, err := readRecord(filepath.Join(dir, stem+".json"), &layerFields{})
	if err != nil {
		probs.add("%s.json %v", stem, err)
		return nil
	}
	bad := len(*probs)
	if v, ok := intField(rec, "schema_version"); !ok || v != LayerRecordSchema {
		probs.add("%s.json has schema_version %s; want %d", stem, fieldText(rec, "schema_version"), LayerRecordSchema)
		return nil
	}
	if s, _ := rec["stage"].(string); s != "all" {
		probs.add("%s.json records a prune stopped after its %s stage, not one to ship", stem, fieldText(rec, "stage"))
	}
	if k, _ := rec["key"].(string); k != lang {
		probs.add("%s.json names key %s; want %q", stem, fieldText(rec, "key"), lang)
	}
	if e, _ := rec["exercise"].(string); lang+"_"+e != stem {
		probs.add("%s.json names exercise %s; want %q", stem, fieldText(rec, "exercise"), name)
	}
	digest := sha(cfg)
	if !sameDigest(rec["cfg_sha256"], digest) {
		probs.add("%s.cfg is not the file %s.json records: its SHA-256 differs", stem, stem)
	}
	if len(*probs) > bad {
		return nil
	}
	pol, err := policy.Parse(stem+".cfg", cfg)
	if err != nil {
		var el policy.ErrorList
		errors.As(err, &el)
		for _, e := range el {
			probs.add("a pruned configuration cannot be read: %v", e)
		}
		return nil
	}
	for _, row := range fsRows(pol) {
		if l := wide.MagicPath(row); l != "" {
			probs.add("%s.cfg (exercise %s) has the row %s, which is or passes through the /proc magic link %s: it grants whatever that process's root, working directory or open file is, and lockstep run refuses it; a base never carries it", stem, name, row, l)
		}
	}
	for _, r := range pol.Bind {
		if r.Transport == policy.UDP && r.Port != 0 {
			probs.add("%s.cfg holds [bind] %s, which only Landlock ABI %d enforces; such a row belongs in %s.abi10.cfg, never in a base", stem, r, ABI10Landlock, stem)
		}
	}
	return &exercise{lang: lang, name: name, stem: stem, cfg: cfg, cfgSHA: digest, pol: pol}
}

// fsRows lists the filesystem rows of p in order.
func fsRows(p *policy.Policy) []string {
	rows := make([]string, 0, len(p.FS))
	for row := range p.FS {
		rows = append(rows, row)
	}
	sort.Strings(rows)
	return rows
}

// checkABI10 checks one stem's ABI-10 record and sidecar (docs/orchestrate.md,
// in Phobos's order), and stores the rows on ex. One problem per stem.
func checkABI10(lang, stem, pathDir, abiDir string, names, abiNames map[string]bool, ex *exercise, probs *problems) {
	hasRec, hasCfg := abiNames[stem+abi10JSON], abiNames[stem+abi10CFG]
	switch {
	case !names[stem+".cfg"] && hasRec:
		probs.add("%s.abi10.json has no %s.cfg beside it", stem, stem)
		return
	case !names[stem+".cfg"]:
		probs.add("%s.abi10.cfg has no %s.cfg beside it", stem, stem)
		return
	case !hasRec:
		probs.add("%s.abi10.cfg has no %s.abi10.json beside it", stem, stem)
		return
	}
	rec, err := readRecord(filepath.Join(abiDir, stem+abi10JSON), &kvmFields{})
	if err != nil {
		probs.add("%s.abi10.json %v", stem, err)
		return
	}
	if v, ok := intField(rec, "schema_version"); !ok || v != ABI10RecordSchema {
		probs.add("%s.abi10.json has schema_version %s; want %d", stem, fieldText(rec, "schema_version"), ABI10RecordSchema)
		return
	}
	if k, _ := rec["key"].(string); k != lang {
		probs.add("%s.abi10.json names key %s; want %q", stem, fieldText(rec, "key"), lang)
		return
	}
	if e, _ := rec["exercise"].(string); lang+"_"+e != stem {
		probs.add("%s.abi10.json names exercise %s; want %q", stem, fieldText(rec, "exercise"), strings.TrimPrefix(stem, lang+"_"))
		return
	}
	mism, _ := rec["mismatches"].([]any)
	if v, _ := rec["verified"].(bool); !v || rec["mismatches"] == nil || len(mism) > 0 {
		why := ""
		if a, ok := rec["aborted"].(string); ok {
			why = ": " + a
		} else if len(mism) > 0 {
			why = fmt.Sprintf(": %d mismatches", len(mism))
		}
		probs.add("%s.abi10.json records a KVM run that did not verify the policy%s", stem, why)
		return
	}
	cfg, err := safefile.ReadFile(filepath.Join(pathDir, stem+".cfg"), policy.MaxFileBytes)
	if err != nil {
		probs.add("%s.cfg cannot be read: %v", stem, err)
		return
	}
	if !sameDigest(rec["verified_cfg_sha256"], sha(cfg)) {
		probs.add("%s.abi10.json verified another %s.cfg than the one beside it", stem, stem)
		return
	}
	if v, ok := intField(rec, "landlock_abi"); !ok || v < ABI10Landlock {
		probs.add("%s.abi10.json records a kernel below Landlock version %d (landlock_abi %s)", stem, ABI10Landlock, fieldText(rec, "landlock_abi"))
		return
	}
	if rec["abi10_cfg_sha256"] == nil {
		if hasCfg {
			probs.add("%s.abi10.cfg is beside a record that wrote no sidecar", stem)
		}
		return
	}
	if !hasCfg {
		probs.add("%s.abi10.json names a sidecar, and %s.abi10.cfg is missing", stem, stem)
		return
	}
	side, err := safefile.ReadFile(filepath.Join(abiDir, stem+abi10CFG), policy.MaxFileBytes)
	if err != nil {
		probs.add("%s.abi10.cfg cannot be read: %v", stem, err)
		return
	}
	if !sameDigest(rec["abi10_cfg_sha256"], sha(side)) {
		probs.add("%s.abi10.cfg is not the file %s.abi10.json records: its SHA-256 differs", stem, stem)
		return
	}
	rows, err := SidecarRows(side)
	if err != nil {
		probs.add("%s.abi10.cfg holds more than UDP bind rows: %v", stem, err)
		return
	}
	if ex != nil {
		ex.rows = rows
	}
}
