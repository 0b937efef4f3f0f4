package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
)

// Layer is a further policy that some cells of the matrix combine after the
// base, as `lockstep run` combines its files.
type Layer struct {
	// File names the layer (provenance and the cell's Layers).
	File   string
	Policy *policy.Policy
	// Exercise, if not "", keeps the layer to that exercise's cells.
	Exercise string
	// MinABI, if not 0, keeps it to kernels whose pin has at least that
	// Landlock ABI. A kernel of unknown ABI (a bzImage file) gets the layer,
	// and its guest refuses whatever it cannot enforce.
	MinABI int
}

// applies says whether the layer belongs to the cell of kernel k and
// exercise ex.
func (l Layer) applies(k Kernel, ex string) bool {
	return (l.Exercise == "" || l.Exercise == ex) && (l.MinABI == 0 || k.ABI == 0 || k.ABI >= l.MinABI)
}

// Base-directory names: the orchestrator's output (docs/orchestrate.md).
const (
	basePrefix   = "BaseLanguage-"
	baseSuffix   = ".cfg"
	exercisesDir = "exercises"
)

// BaseSet is one language base of a base directory with what its exercises
// add: per exercise its remainder (exercises/<key>_<ex>.cfg, the limits)
// and its ABI-10 sidecar (exercises/<key>_<ex>.abi10.cfg, applied only on
// kernels of Landlock ABI 10 or later, as a grading host of that ABI
// applies it).
type BaseSet struct {
	Key    string
	File   string
	Policy *policy.Policy
	Layers []Layer
}

// ReadBaseDir reads every BaseLanguage-<key>.cfg of dir with its exercise
// files, for the exercises of each key under the testing root exercises.
// It refuses a directory without a base, a base whose key has no exercise
// there, and an exercise file of dir that names no such exercise (a stale
// file would otherwise go unchecked), every problem at once.
func ReadBaseDir(dir, exercises string) ([]BaseSet, error) {
	bases, err := filepath.Glob(filepath.Join(dir, basePrefix+"*"+baseSuffix))
	if err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		return nil, fmt.Errorf("verify: %s holds no %s<key>%s", dir, basePrefix, baseSuffix)
	}
	sort.Strings(bases)
	used := map[string]bool{}
	var sets []BaseSet
	var problems []string
	for _, b := range bases {
		s, err := readBaseSet(dir, b, exercises, used)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		sets = append(sets, s)
	}
	problems = append(problems, unusedExerciseFiles(dir, used)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("verify: base directory %s:\n  %s", dir, strings.Join(problems, "\n  "))
	}
	return sets, nil
}

// readBaseSet reads one base and its exercises' files, marking each file
// it used in used.
func readBaseSet(dir, file, exercises string, used map[string]bool) (BaseSet, error) {
	key := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), basePrefix), baseSuffix)
	p, err := policy.ParseFile(file)
	if err != nil {
		return BaseSet{}, err
	}
	found, err := exercise.ForKey(exercises, key)
	if err == nil && len(found) == 0 {
		err = fmt.Errorf("%s: no exercise of key %q under %s to verify it against", filepath.Base(file), key, exercises)
	}
	if err != nil {
		return BaseSet{}, err
	}
	s := BaseSet{Key: key, File: file, Policy: p}
	for _, f := range found {
		for _, x := range []struct {
			suffix string
			minABI int
		}{{baseSuffix, 0}, {kvmrecord.ConfigSuffix, landlock.ABIUDP}} {
			path := filepath.Join(dir, exercisesDir, key+"_"+f.Name+x.suffix)
			if _, err := os.Lstat(path); os.IsNotExist(err) {
				continue
			}
			lp, err := policy.ParseFile(path)
			if err != nil {
				return BaseSet{}, err
			}
			used[path] = true
			s.Layers = append(s.Layers, Layer{File: path, Policy: lp, Exercise: f.Name, MinABI: x.minABI})
		}
	}
	return s, nil
}

// unusedExerciseFiles names every exercises/*.cfg of dir that no base's
// exercise used.
func unusedExerciseFiles(dir string, used map[string]bool) []string {
	files, _ := filepath.Glob(filepath.Join(dir, exercisesDir, "*"+baseSuffix))
	var out []string
	for _, f := range files {
		if !used[f] {
			out = append(out, fmt.Sprintf("%s belongs to no base's exercise (no %s<key>%s, or no such exercise under the testing root)", f, basePrefix, baseSuffix))
		}
	}
	return out
}

// SelectBases keeps the sets of the keys named, in sets' order; no keys
// keeps every one. A key without a base is refused, naming the keys there
// are.
func SelectBases(sets []BaseSet, keys []string) ([]BaseSet, error) {
	if len(keys) == 0 {
		return sets, nil
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	var out []BaseSet
	for _, s := range sets {
		if want[s.Key] {
			out = append(out, s)
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		var missing []string
		for k := range want {
			missing = append(missing, k)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("verify: no %s<key>%s for key(s) %s; there are: %s", basePrefix, baseSuffix, strings.Join(missing, ", "), strings.Join(SortedKeys(sets), ", "))
	}
	return out, nil
}
