package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem of a policy file, at a line (Line 0: the file as a
// whole, e.g. it cannot be read).
type Error struct {
	File string
	Line int
	Msg  string
}

// Error formats the problem as "file:line: msg" (or "file: msg").
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ErrorList is every problem Parse or Load found, sorted by file and line.
// Its Error method prints one problem per line.
type ErrorList []*Error

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// err sorts the list and returns it, or nil when it is empty.
func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].File != l[j].File {
			return l[i].File < l[j].File
		}
		return l[i].Line < l[j].Line
	})
	return l
}
