package exercise

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Found is one exercise folder discovery found, not yet checked against the
// contract (see Read).
type Found struct {
	// Key is prune.json's "key", else Family.
	Key string
	// Family and Name are the folder names: <root>/<Family>/<Name>.
	Family string
	Name   string
	// Dir is the exercise folder (the root joined with Family and Name).
	Dir string
}

// Problem is one reason discovery refused a testing root.
type Problem struct {
	Path string
	Msg  string
}

func (p Problem) String() string { return p.Path + ": " + p.Msg }

// DiscoveryError refuses a whole testing root; nothing may be pruned from it.
// Problems are sorted by path, one per independent problem.
type DiscoveryError struct {
	Root     string
	Problems []Problem
}

func (e *DiscoveryError) Error() string {
	first := e.Problems[0].String()
	if len(e.Problems) == 1 {
		return "exercises in " + e.Root + " refused: " + first
	}
	return fmt.Sprintf("exercises in %s refused: %s (and %d more)", e.Root, first, len(e.Problems)-1)
}

// Lines returns every problem, one line each.
func (e *DiscoveryError) Lines() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.String()
	}
	return out
}

// Discover lists every exercise under root (<root>/<family>/<exercise>),
// sorted by key, family and name. Dot-directories and plain files are
// ignored. It refuses the whole tree with a *DiscoveryError when a
// prune.json is unreadable, not a regular file, or not a valid config
// (ParseConfig: unknown keys, wrong types, bad values), when an exercise has
// no executable build script, when an exercise's key is not a valid key, or
// when two exercises of one key share a folder name. Each problem names the
// file, the key and what is wanted.
func Discover(root string) ([]Found, error) {
	families, err := subdirs(root)
	if err != nil {
		return nil, fmt.Errorf("exercises: %w", err)
	}
	var found []Found
	var problems []Problem
	for _, family := range families {
		names, err := subdirs(filepath.Join(root, family))
		if err != nil {
			problems = append(problems, Problem{filepath.Join(root, family), err.Error()})
			continue
		}
		for _, name := range names {
			dir := filepath.Join(root, family, name)
			key, probs := discoverOne(dir, family)
			if len(probs) > 0 {
				problems = append(problems, probs...)
				continue
			}
			found = append(found, Found{Key: key, Family: family, Name: name, Dir: dir})
		}
	}
	byKeyName := map[[2]string][]string{}
	for _, f := range found {
		k := [2]string{f.Key, f.Name}
		byKeyName[k] = append(byKeyName[k], f.Family)
	}
	for k, fams := range byKeyName {
		if len(fams) > 1 {
			sort.Strings(fams)
			problems = append(problems, Problem{filepath.Join(root, "*", k[1]),
				fmt.Sprintf("exercises %s of key %q share the name %q; want one name per key (records are named <key>_<exercise>)",
					strings.Join(fams, "/"+k[1]+", ")+"/"+k[1], k[0], k[1])})
		}
	}
	if len(problems) > 0 {
		sort.Slice(problems, func(i, j int) bool {
			if problems[i].Path != problems[j].Path {
				return problems[i].Path < problems[j].Path
			}
			return problems[i].Msg < problems[j].Msg
		})
		return nil, &DiscoveryError{Root: root, Problems: problems}
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Name < b.Name
	})
	return found, nil
}

// ForKey is Discover narrowed to one key. It refuses an invalid key, and
// returns an empty list (no error) when the tree has no exercise of it.
func ForKey(root, key string) ([]Found, error) {
	if !ValidKey(key) {
		return nil, fmt.Errorf("exercises: key %q is not a key: want lower-case letters and digits in dash-separated words", key)
	}
	all, err := Discover(root)
	if err != nil {
		return nil, err
	}
	var out []Found
	for _, f := range all {
		if f.Key == key {
			out = append(out, f)
		}
	}
	return out, nil
}

// Named keeps the exercises of found (one key's, as ForKey returns them)
// whose names are given, all of them when none is. A name found lacks is
// an error naming every such name and the exercises there are.
func Named(found []Found, names ...string) ([]Found, error) {
	if len(names) == 0 {
		return found, nil
	}
	var keep []Found
	var have, unknown []string
	for _, f := range found {
		have = append(have, f.Name)
		if slices.Contains(names, f.Name) {
			keep = append(keep, f)
		}
	}
	for _, n := range names {
		if !slices.Contains(have, n) {
			unknown = append(unknown, strconv.Quote(n))
		}
	}
	if len(unknown) > 0 {
		key := ""
		if len(found) > 0 {
			key = found[0].Key
		}
		return nil, fmt.Errorf("%s: no such exercise of key %q; there are: %s", strings.Join(unknown, ", "), key, strings.Join(have, ", "))
	}
	return keep, nil
}

// subdirs lists the non-dot directories of dir (following symbolic links),
// sorted.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			st, err := os.Stat(filepath.Join(dir, e.Name()))
			isDir = err == nil && st.IsDir()
		}
		if isDir {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// discoverOne reads the exercise in dir as discovery does: its key, and
// every problem that seen here, on the host, spares a guest boot that could
// only refuse it: a prune.json that ParseConfig refuses (unknown keys, wrong
// types, bad values), and no usable build script.
func discoverOne(dir, family string) (string, []Problem) {
	var probs []Problem
	cfgPath := filepath.Join(dir, ConfigFile)
	key, err := keyOf(dir, family)
	if err != nil {
		probs = append(probs, Problem{cfgPath, err.Error()})
	} else if data, err := readConfig(dir); err == nil {
		if _, err := ParseConfig(data); err != nil {
			var ce *ConfigError
			errors.As(err, &ce)
			for _, p := range ce.Problems {
				probs = append(probs, Problem{cfgPath, p})
			}
		}
	}
	if _, err := buildScript(dir); err != nil {
		probs = append(probs, Problem{dir, err.Error()})
	}
	return key, probs
}

// keyOf reads the key of the exercise in dir, as discovery does.
func keyOf(dir, family string) (string, error) {
	data, err := readConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if !ValidKey(family) {
			return "", fmt.Errorf("no prune.json, and the family name %q is not a key: want lower-case letters and digits in dash-separated words", family)
		}
		return family, nil
	}
	if err != nil {
		return "", err
	}
	key, err := declaredKey(data)
	if err != nil {
		return "", err
	}
	if key == "" {
		key = family
	}
	if !ValidKey(key) {
		return "", fmt.Errorf("key %q is not a key: want lower-case letters and digits in dash-separated words (^[a-z0-9]+(-[a-z0-9]+)*$)", key)
	}
	return key, nil
}

// maxConfigBytes bounds prune.json; a real one is a few hundred bytes.
const maxConfigBytes = 1 << 20

// readConfig reads dir/prune.json: fs.ErrNotExist when there is none (not
// even a dangling link), an error when it is not a regular file.
func readConfig(dir string) ([]byte, error) {
	p := filepath.Join(dir, ConfigFile)
	if _, err := os.Lstat(p); err != nil {
		return nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("unreadable: %v", unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("is %s, want a regular file", safefile.Kind(st.Mode()))
	}
	if st.Size() > maxConfigBytes {
		return nil, fmt.Errorf("is %d bytes, want at most %d", st.Size(), maxConfigBytes)
	}
	data, err := safefile.ReadFile(p, maxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("unreadable: %v", unwrapPath(err))
	}
	return data, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Keys are the distinct keys of the exercises under root (Discover's),
// sorted.
func Keys(root string) ([]string, error) {
	found, err := Discover(root)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, f := range found {
		keys = append(keys, f.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// EveryKey is Keys for a run over every key: an error when there is none,
// or when an exercise's key is all, the word that names every key.
func EveryKey(root, all string) ([]string, error) {
	keys, err := Keys(root)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no exercise under %s", root)
	}
	if slices.Contains(keys, all) {
		return nil, fmt.Errorf("an exercise under %s has the key %q, which --key %s cannot tell from every key", root, all, all)
	}
	return keys, nil
}

// CheckNamed says which of names the key has no exercise of under root
// (nil for none given), so a run can refuse before it starts.
func CheckNamed(root, key string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	found, err := ForKey(root, key)
	if err == nil && len(found) == 0 {
		err = fmt.Errorf("no exercise of key %q under %s", key, root)
	}
	if err == nil {
		_, err = Named(found, names...)
	}
	return err
}
