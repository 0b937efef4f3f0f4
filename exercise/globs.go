package exercise

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// MatchReports returns the files under dir that one of globs matches, as
// sorted slash-separated paths relative to dir. A glob is a relative path
// whose parts are path.Match patterns, and "**" matches any number of
// folders (none included). Symbolic links are listed as they are, never
// followed into; only folders a glob could reach are walked.
func MatchReports(dir string, globs []string) ([]string, error) {
	split := make([][]string, len(globs))
	for i, g := range globs {
		if err := checkGlob(g); err != nil {
			return nil, err
		}
		split[i] = strings.Split(g, "/")
	}
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reports: %w", err)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		segs := strings.Split(filepath.ToSlash(rel), "/")
		if d.IsDir() {
			for _, g := range split {
				if mayContain(g, segs) {
					return nil
				}
			}
			return fs.SkipDir
		}
		for _, g := range split {
			if matchSegments(g, segs) {
				out = append(out, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// matchSegments reports whether the path segments name match the glob.
func matchSegments(glob, name []string) bool {
	if len(glob) == 0 {
		return len(name) == 0
	}
	if glob[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegments(glob[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := path.Match(glob[0], name[0])
	return ok && matchSegments(glob[1:], name[1:])
}

// mayContain reports whether a file matching glob could lie beneath the
// folder whose segments are dir.
func mayContain(glob, dir []string) bool {
	if len(dir) == 0 {
		return len(glob) > 0
	}
	if len(glob) == 0 {
		return false
	}
	if glob[0] == "**" {
		return true
	}
	ok, _ := path.Match(glob[0], dir[0])
	return ok && mayContain(glob[1:], dir[1:])
}
