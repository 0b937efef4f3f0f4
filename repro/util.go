package repro

import (
	"slices"
	"strings"
)

// tail returns the last n non-empty lines of s.
func tail(s string, n int) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, "\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if lines == nil {
		return []string{}
	}
	return lines
}

// sortedSet sorts s and drops repeats; nil becomes empty.
func sortedSet(s []string) []string {
	if s == nil {
		return []string{}
	}
	slices.Sort(s)
	return slices.Compact(s)
}
