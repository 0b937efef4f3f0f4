package exercise

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// BuildScripts are the build script names, looked up in this order.
var BuildScripts = []string{"build_script.sh", "build_script"}

// DefaultWorkDir is the working directory of a production run, the one
// exercises are graded in.
const DefaultWorkDir = "/var/tmp/testing-dir"

// ErrRefused marks an exercise that does not meet the contract; errors from
// Read wrap it. A refused exercise aborts alone; the others go on.
var ErrRefused = errors.New("the exercise was refused")

// Exercise is one exercise that meets the contract.
type Exercise struct {
	Key    string
	Family string
	Name   string
	// Dir is the exercise folder, absolute.
	Dir string
	// Script is the build script's name in Dir ("build_script.sh" or
	// "build_script").
	Script string
	// Config is prune.json (the zero Config when there is none).
	Config Config
}

// Read checks one discovered exercise against the contract: a valid
// prune.json, an executable build script, no committed file matching the
// report globs, and the compiled-programs directory, if declared, present.
// Every problem is named; the error wraps ErrRefused.
func Read(f Found) (*Exercise, error) {
	dir, err := filepath.Abs(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("exercise %s/%s: %w", f.Family, f.Name, err)
	}
	e := &Exercise{Key: f.Key, Family: f.Family, Name: f.Name, Dir: dir}
	var problems []string
	data, err := readConfig(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		problems = append(problems, "prune.json "+err.Error())
	default:
		c, err := ParseConfig(data)
		if err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				for _, p := range ce.Problems {
					problems = append(problems, "prune.json: "+p)
				}
			} else {
				problems = append(problems, err.Error())
			}
		}
		e.Config = c
		if c.Key != "" && c.Key != f.Key {
			problems = append(problems, fmt.Sprintf("prune.json key %q differs from the discovered key %q", c.Key, f.Key))
		}
	}
	if e.Script, err = buildScript(dir); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		committed, err := MatchReports(dir, e.ReportGlobs())
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, c := range committed {
			problems = append(problems, fmt.Sprintf("%s is committed but matches the report globs; every report must come from a run", c))
		}
		if d := e.CompiledProgramsDirectory(); d != "" {
			st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(d)))
			if err != nil || !st.IsDir() {
				problems = append(problems, fmt.Sprintf("compiled-programs directory %q is not a directory of the exercise; it must exist before the run", d))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, &RefusedError{Dir: dir, Problems: problems}
	}
	return e, nil
}

// ReadDir reads the exercise folder dir on its own: its family is the parent
// folder's name and its key prune.json's, else the family's.
func ReadDir(dir string) (*Exercise, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("exercise %s: %w", dir, err)
	}
	family := filepath.Base(filepath.Dir(abs))
	key, err := keyOf(abs, family)
	if err != nil {
		return nil, &RefusedError{Dir: abs, Problems: []string{"prune.json: " + err.Error()}}
	}
	return Read(Found{Key: key, Family: family, Name: filepath.Base(abs), Dir: abs})
}

// RefusedError lists why an exercise does not meet the contract; it wraps
// ErrRefused.
type RefusedError struct {
	Dir      string
	Problems []string
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("%v: %s: %s", ErrRefused, e.Dir, e.Problems[0])
	if len(e.Problems) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(e.Problems)-1)
	}
	return s
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Unwrap() error { return ErrRefused }

func buildScript(dir string) (string, error) {
	for _, name := range BuildScripts {
		st, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", name, unwrapPath(err))
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("%s is %s, want an executable regular file", name, safefile.Kind(st.Mode()))
		}
		if st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("%s is not executable (mode %v), want an executable build script", name, st.Mode().Perm())
		}
		return name, nil
	}
	return "", fmt.Errorf("no build_script.sh or build_script, want an executable build script")
}

// ReportGlobs are the exercise's report globs, or DefaultReportGlobs.
func (e *Exercise) ReportGlobs() []string {
	if len(e.Config.ReportGlobs) > 0 {
		return e.Config.ReportGlobs
	}
	return DefaultReportGlobs
}

// CompiledProgramsDirectory is the folder, relative to the working
// directory, whose programs the exercise executes, or "" when it declares
// none (runs_compiled_programs false).
func (e *Exercise) CompiledProgramsDirectory() string {
	if !e.Config.RunsCompiledPrograms {
		return ""
	}
	if e.Config.CompiledProgramsDirectory != "" {
		return e.Config.CompiledProgramsDirectory
	}
	return DefaultCompiledProgramsDirectory
}

// CompiledProgramsPath is CompiledProgramsDirectory inside workDir, or "".
func (e *Exercise) CompiledProgramsPath(workDir string) string {
	d := e.CompiledProgramsDirectory()
	if d == "" {
		return ""
	}
	return path.Join(filepath.ToSlash(workDir), d)
}

// DeclaredHosts parses the declared hosts (Read has checked them).
func (e *Exercise) DeclaredHosts() []DeclaredHost {
	out := make([]DeclaredHost, 0, len(e.Config.DeclaredHosts))
	for _, h := range e.Config.DeclaredHosts {
		if d, err := ParseDeclaredHost(h); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// SeedConnectRules are the [connect] rules the declared hosts become.
func (e *Exercise) SeedConnectRules() []policy.ConnectRule {
	var out []policy.ConnectRule
	for _, h := range e.DeclaredHosts() {
		out = append(out, h.Rule())
	}
	return out
}

// Stem is "<key>_<exercise>", the stem of every file written for it.
func (e *Exercise) Stem() string { return e.Key + "_" + e.Name }
