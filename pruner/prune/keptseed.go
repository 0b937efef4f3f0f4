package prune

import (
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
)

// KeptComment is written above a kept seed's row in the pruned policy.
func KeptComment(name, reason string) string {
	return fmt.Sprintf("kept: from the kept seed %s, not from a refusal, and never minimised: %s", name, reason)
}

// keptSeed reads prune.json's kept_seed: rows every prune grants whether a
// run here needs them or not, each with the comment above it that says why.
// It returns the rows and the comment of each row's path; a kept seed that
// breaks a rule aborts, naming every problem.
func (s *state) keptSeed() ([]search.Item, map[string]string, error) {
	name := s.ex.Config.KeptSeed
	if name == "" {
		return nil, nil, nil
	}
	kp, err := readSeed(s.opts.SeedDir, name)
	if err != nil {
		return nil, nil, &search.AbortError{Reason: fmt.Sprintf("kept seed %s: %v", name, err)}
	}
	var problems []string
	if len(kp.Connect)+len(kp.Bind)+len(kp.Limits) > 0 {
		problems = append(problems, "a kept seed holds only [read] [write] [create] [delete] rows")
	}
	items := search.Items(kp)
	comments := map[string]string{}
	for _, it := range items {
		problems = append(problems, keptRowProblems(it)...)
		reason := strings.TrimSpace(kp.Comments[it.Path])
		if reason == "" {
			problems = append(problems, fmt.Sprintf("%s has no comment above it saying why it is kept", it))
		}
		comments[it.Path] = KeptComment(name, strings.ReplaceAll(reason, "\n", " "))
	}
	if len(items) == 0 {
		problems = append(problems, "it holds no row")
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, nil, &search.AbortError{Reason: fmt.Sprintf("kept seed %s: %s", name, strings.Join(uniq(problems), "; "))}
	}
	var rows []string
	for _, it := range items {
		rows = append(rows, it.String())
		s.because[it] = append(s.because[it], "kept seed "+name+": "+comments[it.Path])
	}
	s.entry("kept seed", map[string]any{"name": name, "rows": rows})
	return items, comments, nil
}

// keptRowProblems checks one row: a seed's sections, on an existing
// directory, regular file or character device (a file or device only
// [read] and [write]); nothing written on or beneath /proc or /sys; beneath
// /dev, only [write] to a character device.
func keptRowProblems(it search.Item) []string {
	switch it.Section {
	case policy.Read, policy.Write, policy.Create, policy.Delete:
	default:
		return []string{fmt.Sprintf("%s: a kept seed holds only [read] [write] [create] [delete] rows", it)}
	}
	st, err := os.Lstat(it.Path)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v; want an existing directory, regular file or character device", it, err)}
	}
	mode := st.Mode().Type()
	dev := mode == fs.ModeDevice|fs.ModeCharDevice
	var out []string
	switch {
	case st.IsDir():
	case mode.IsRegular() || dev:
		if it.Section != policy.Read && it.Section != policy.Write {
			out = append(out, fmt.Sprintf("%s: a file or device takes only [read] and [write]", it))
		}
	default:
		out = append(out, fmt.Sprintf("%s: not a directory, regular file or character device", it))
	}
	if !policy.IsWriteClass(it.Section) {
		return out
	}
	for _, top := range []string{"/proc", "/sys"} {
		if it.Path == top || policy.Beneath(it.Path, top) {
			out = append(out, fmt.Sprintf("%s: a kept seed writes nothing on or beneath %s", it, top))
		}
	}
	if (it.Path == "/dev" || policy.Beneath(it.Path, "/dev")) && !(dev && it.Section == policy.Write) {
		out = append(out, fmt.Sprintf("%s: beneath /dev a kept seed only writes to a character device", it))
	}
	return out
}

func uniq(sorted []string) []string {
	var out []string
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}
