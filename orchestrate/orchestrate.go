package orchestrate

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// DefaultRuntimeChdir is the working directory TailPhobos.cfg names when
// Options.RuntimeChdir is empty (Phobos's --runtime-chdir default).
const DefaultRuntimeChdir = "/var/tmp/testing-dir"

// SummarySchema versions the Summary document.
const SummarySchema = 1

// Options configures one merge.
type Options struct {
	// Langs are the language keys to merge, in order (each ^[a-z0-9-]+$).
	// Required.
	Langs []string
	// PathDir holds the pruner's <lang>_<ex>.cfg and .json (and, when
	// KVMDirs is empty, the observer's <lang>_<ex>.abi10.json and .abi10.cfg).
	// Required.
	PathDir string
	// KVMDirs are observer result directories. Empty: the ABI-10 files are
	// read from PathDir. Two or more: their sidecars must hold the same rows
	// (comment lines ignored), and the first directory's files are merged.
	KVMDirs []string
	// CoreDir is the output tree (created if missing). Required.
	CoreDir string
	// RuntimeChdir is the directory TailPhobos.cfg names; "" means
	// DefaultRuntimeChdir. Absolute and normal.
	RuntimeChdir string
	// AllowUnknownRoot merges an exercise whose record or ABI-10 record
	// has no provenance.root_digest beside one that has (a prune by
	// Phobos's container stage records none); Summary.UnknownRoots and
	// comments in the tree name each such pair. Different digests are
	// refused regardless.
	AllowUnknownRoot bool
	// Log receives progress; nil discards it. Warnings are not logged:
	// they are Summary.Warnings.
	Log *slog.Logger

	// hook lets tests stop the writer at a stage.
	hook func(stage) error
}

// Refusal is every problem found before anything was written.
type Refusal struct {
	Problems []string
}

// Error is one line: the count and the first problem.
func (r *Refusal) Error() string {
	if len(r.Problems) == 1 {
		return "refused: " + r.Problems[0]
	}
	return fmt.Sprintf("refused with %d problems, the first: %s", len(r.Problems), r.Problems[0])
}

// Summary describes a merge that was written.
type Summary struct {
	SchemaVersion int        `json:"schema_version"`
	CoreDir       string     `json:"core_dir"`
	KVMDirs       []string   `json:"kvm_dirs"`
	Languages     []Language `json:"languages"`
	Files         []File     `json:"files"`
	Warnings      []string   `json:"warnings"`
	// UnknownRoots are the pairs merged by Options.AllowUnknownRoot.
	UnknownRoots []UnknownRoot `json:"unknown_roots"`
}

// Language is one merged language.
type Language struct {
	Name      string     `json:"name"`
	Base      string     `json:"base"`      // BaseLanguage-<lang>.cfg
	BaseHash  string     `json:"base_hash"` // policy.Hash of the base
	BaseRows  int        `json:"base_rows"`
	ABI10Rows []string   `json:"abi10_rows"`
	Exercises []Exercise `json:"exercises"`
}

// Exercise is one merged exercise.
type Exercise struct {
	Name      string   `json:"name"`
	CfgSHA256 string   `json:"cfg_sha256"`     // raw bytes of the pruner's .cfg
	Rows      int      `json:"remainder_rows"` // rows of exercises/<lang>_<ex>.cfg
	ABI10Rows []string `json:"abi10_rows"`
}

// File is one file the merge wrote.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// rowCount counts a policy's rows.
func rowCount(p *policy.Policy) int {
	n := len(p.Connect) + len(p.Bind) + len(p.Limits)
	for _, secs := range p.FS {
		for _, ok := range secs {
			if ok {
				n++
			}
		}
	}
	return n
}

func ruleStrings(rs []policy.BindRule) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

func checkOptions(o *Options, probs *problems) {
	if len(o.Langs) == 0 {
		probs.add("no language given; want --langs k1,k2")
	}
	seen := map[string]bool{}
	for _, l := range o.Langs {
		switch {
		case !ValidKey(l):
			probs.add("language key %q is not lower-case letters, digits and '-'", l)
		case seen[l]:
			probs.add("language %q is given twice", l)
		}
		seen[l] = true
	}
	if o.PathDir == "" || o.CoreDir == "" {
		probs.add("a path directory and an output directory are required")
	} else if p := holdsWorkDir(o.CoreDir); p != "" {
		probs.add("%s", p)
	}
	if err := RepeatedDir(o.KVMDirs); err != nil {
		probs.add("%v", err)
	}
	if o.RuntimeChdir == "" {
		o.RuntimeChdir = DefaultRuntimeChdir
	}
	if c := o.RuntimeChdir; !strings.HasPrefix(c, "/") || path.Clean(c) != c || strings.ContainsAny(c, " \t\n\r\v\f#") {
		probs.add("runtime directory %q is not an absolute, normal path without white space", c)
	}
}

// RepeatedDir refuses one KVM directory given twice, however it is spelt
// (the same string, "./kvm/", a link to it): the same device and inode. The
// sidecars of one observer run would otherwise "agree" with themselves and
// count as two runs. A directory that cannot be read is left to listDir.
func RepeatedDir(dirs []string) error {
	type id struct{ dev, ino uint64 }
	seen := map[id]string{}
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		k := id{uint64(st.Dev), st.Ino}
		if first, ok := seen[k]; ok {
			return fmt.Errorf("--kvm-dir %s and --kvm-dir %s are one directory (the same device and inode): the sidecars of one observer run would count as two that agreed; give each guest's results once", first, d)
		}
		seen[k] = d
	}
	return nil
}

// holdsWorkDir refuses an output directory that is or holds the current
// directory ("." and ".." among them): the tree is swapped with a sibling
// and the old one removed, which would pull the directory the merge runs in
// away from under it (and "." has no sibling to swap with).
func holdsWorkDir(core string) string {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Sprintf("cannot tell whether output directory %s holds the current directory: %v", core, err)
	}
	abs, err := filepath.Abs(core)
	if err != nil {
		return fmt.Sprintf("output directory %s: %v", core, err)
	}
	cands := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		cands = append(cands, real)
	}
	wds := []string{wd}
	if real, err := filepath.EvalSymlinks(wd); err == nil {
		wds = append(wds, real)
	}
	for _, c := range cands {
		for _, w := range wds {
			if w == c || c == "/" || strings.HasPrefix(w, c+"/") {
				return fmt.Sprintf("output directory %s is or holds the current directory %s: the merge replaces the whole tree, so run it from outside (and name the tree itself, not \".\" or \"..\")", core, wd)
			}
		}
	}
	return ""
}

// Run checks every input, merges, renders and replaces the output tree
// atomically. On any problem it returns a *Refusal and writes nothing; on an
// error while writing, the previous tree is left as it was.
func Run(o Options) (*Summary, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var probs problems
	checkOptions(&o, &probs)
	if len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	names := listDir(o.PathDir, &probs)
	var kvmNames map[string]bool
	kvmDir := ""
	if len(o.KVMDirs) > 0 {
		compareKVMDirs(o.KVMDirs, &probs)
		kvmDir = o.KVMDirs[0]
		kvmNames = listDir(kvmDir, &probs)
	}
	unknown := checkRootDigests(o.Langs, o.PathDir, abiDirs(o), o.AllowUnknownRoot, &probs)
	var langs []*language
	perLang := map[string][]*exercise{}
	for _, l := range o.Langs {
		before := len(probs)
		exs := checkLanguage(l, o.PathDir, kvmDir, names, kvmNames, &probs)
		if len(exs) == 0 && len(probs) == before {
			probs.add("no usable pruning result for: %s (no %s_*.cfg in %s)", l, l, o.PathDir)
		}
		perLang[l] = exs
		log.Info("checked", "language", l, "exercises", len(exs))
	}
	checkKVMRecords(o, names, perLang, &probs)
	if len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	for _, l := range o.Langs {
		if m := mergeLanguage(l, perLang[l], &probs); m != nil {
			langs = append(langs, m)
		}
	}
	if len(probs) > 0 {
		return nil, &Refusal{Problems: probs}
	}
	sum := &Summary{SchemaVersion: SummarySchema, CoreDir: o.CoreDir, KVMDirs: append([]string{}, o.KVMDirs...), Warnings: []string{}, UnknownRoots: unknown}
	// Warnings go to the summary only: its reader reports them, and Log's
	// handler writes to the same stream.
	files := render(langs, o.RuntimeChdir, func(w string) { sum.Warnings = append(sum.Warnings, w) })
	markUnknownRoots(files, unknown)
	if err := writeTree(o.CoreDir, files, o.Langs, o.hook); err != nil {
		return nil, fmt.Errorf("write %s (the previous tree is unchanged): %w", o.CoreDir, err)
	}
	for _, f := range files {
		sum.Files = append(sum.Files, File{Path: f.path, SHA256: sha(f.data), Bytes: len(f.data)})
	}
	for _, l := range langs {
		ls := Language{Name: l.name, Base: "BaseLanguage-" + l.name + ".cfg", BaseHash: l.base.Hash(), BaseRows: rowCount(l.base), ABI10Rows: ruleStrings(l.rows)}
		for _, ex := range l.exercises {
			ls.Exercises = append(ls.Exercises, Exercise{
				Name: ex.name, CfgSHA256: ex.cfgSHA,
				Rows:      rowCount(ex.remainder),
				ABI10Rows: ruleStrings(ex.rows),
			})
		}
		sum.Languages = append(sum.Languages, ls)
	}
	log.Info("written", "dir", o.CoreDir, "files", len(files))
	return sum, nil
}

// compareKVMDirs refuses any difference between the sidecars of several
// observer runs: the set of sidecars, and each one's rows (lines not
// starting with "#"). Records are not compared (their provenance differs).
func compareKVMDirs(dirs []string, probs *problems) {
	type side struct {
		rows map[string][]string
	}
	read := func(dir string) *side {
		s := &side{rows: map[string][]string{}}
		ents, err := os.ReadDir(dir)
		if err != nil {
			probs.add("cannot list KVM directory %s: %v", dir, err)
			return nil
		}
		for _, e := range ents {
			if !isFile(dir, e) || !strings.HasSuffix(e.Name(), abi10CFG) {
				continue
			}
			data, err := safefile.ReadFile(filepath.Join(dir, e.Name()), policy.MaxFileBytes)
			if err != nil {
				probs.add("cannot read %s: %v", filepath.Join(dir, e.Name()), err)
				continue
			}
			s.rows[e.Name()] = sidecarRowLines(data)
		}
		return s
	}
	ref := read(dirs[0])
	for _, d := range dirs[1:] {
		other := read(d)
		if ref == nil || other == nil {
			continue
		}
		var names []string
		for n := range ref.rows {
			names = append(names, n)
		}
		for n := range other.rows {
			if _, ok := ref.rows[n]; !ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			a, inA := ref.rows[n]
			b, inB := other.rows[n]
			ex := strings.TrimSuffix(n, abi10CFG)
			switch {
			case !inB:
				probs.add("the guests disagree on %s: %s has %s, %s has none", ex, dirs[0], n, d)
			case !inA:
				probs.add("the guests disagree on %s: %s has %s, %s has none", ex, d, n, dirs[0])
			case strings.Join(a, "\n") != strings.Join(b, "\n"):
				probs.add("the guests disagree on %s: %s has rows %s, %s has rows %s", ex, dirs[0], rowsText(a), d, rowsText(b))
			}
		}
	}
}

func rowsText(rows []string) string {
	var keep []string
	for _, r := range rows {
		if strings.TrimSpace(r) != "" {
			keep = append(keep, fmt.Sprintf("%q", r))
		}
	}
	if len(keep) == 0 {
		return "(none)"
	}
	return "[" + strings.Join(keep, ", ") + "]"
}

// IsRefusal reports whether err is a *Refusal.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}
