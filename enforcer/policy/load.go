package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// ParseFile reads and parses the policy file at path. A path that is empty,
// missing, a dangling link, a directory, not a regular file or unreadable is
// refused with its own message.
func ParseFile(name string) (*Policy, error) {
	data, err := readPolicyFile(name)
	if err != nil {
		return nil, ErrorList{err}
	}
	return Parse(name, data)
}

// MaxFileBytes bounds a policy file: the largest shipped base is a few
// kilobytes, and a read of /dev/zero or a growing file must end.
const MaxFileBytes = 16 << 20

// ReadFile reads the policy file at name as ParseFile does, with the same
// refusals, as an ErrorList.
func ReadFile(name string) ([]byte, error) {
	data, err := readPolicyFile(name)
	if err != nil {
		return nil, ErrorList{err}
	}
	return data, nil
}

func readPolicyFile(name string) ([]byte, *Error) {
	if name == "" {
		return nil, &Error{File: `""`, Msg: "an empty policy path was given; name a .cfg file"}
	}
	fi, err := os.Stat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, lerr := os.Lstat(name); lerr == nil {
				return nil, &Error{File: name, Msg: "is a dangling symbolic link; want a readable .cfg file"}
			}
			return nil, &Error{File: name, Msg: "does not exist; want a readable .cfg file"}
		}
		return nil, &Error{File: name, Msg: fmt.Sprintf("cannot be inspected: %v", unwrapPath(err))}
	}
	if fi.IsDir() {
		return nil, &Error{File: name, Msg: "is a directory; want a .cfg file"}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{File: name, Msg: fmt.Sprintf("is %s, not a regular file; want a .cfg file", safefile.Kind(fi.Mode()))}
	}
	data, err := safefile.ReadFile(name, MaxFileBytes)
	if err != nil {
		return nil, &Error{File: name, Msg: fmt.Sprintf("cannot be read: %v", unwrapPath(err))}
	}
	return data, nil
}

func unwrapPath(err error) error {
	if se, ok := errors.AsType[*safefile.Error](err); ok {
		return errors.New(se.Problem)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Load combines policy files: every
// Base*.cfg of baseDir in sorted order (baseDir "" means no bases; a baseDir
// without any Base*.cfg is refused, so nothing ever runs unconfined by
// accident), then each config in order. Paths and network rules are unioned,
// limits combined (a zero spelling switches a limit off and wins, else the
// largest value). When configs is empty every [connect] and
// [bind] row of the bases is dropped: no network without an exercise config.
// Problems of every file are reported together.
func Load(baseDir string, configs []string) (*Policy, error) {
	var files []string
	var errs ErrorList
	if baseDir != "" {
		bases, err := baseFiles(baseDir)
		if err != nil {
			errs = append(errs, err)
		}
		files = append(files, bases...)
	}
	files = append(files, configs...)
	var ps []*Policy
	for _, f := range files {
		p, err := ParseFile(f)
		if err != nil {
			errs = append(errs, err.(ErrorList)...)
			continue
		}
		ps = append(ps, p)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	u := Union(ps...)
	if len(configs) == 0 {
		u.Connect, u.Bind = nil, nil
	}
	return u, nil
}

// baseFiles lists the Base*.cfg files of dir in sorted order. dir is taken
// literally: only the file names inside it are matched, so a directory
// named "bases*" or "[x]" is that one directory, never a pattern that could
// merge several.
func baseFiles(dir string) ([]string, *Error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{File: dir, Msg: "does not exist; want the directory holding the Base*.cfg files"}
	case err != nil && !isDir(dir):
		return nil, &Error{File: dir, Msg: "is not a directory; want the directory holding the Base*.cfg files"}
	case err != nil:
		return nil, &Error{File: dir, Msg: fmt.Sprintf("cannot list Base*.cfg: %v", unwrapPath(err))}
	}
	var bases []string
	for _, e := range entries { // ReadDir sorts by name
		if ok, _ := filepath.Match("Base*.cfg", e.Name()); ok {
			bases = append(bases, filepath.Join(dir, e.Name()))
		}
	}
	if len(bases) == 0 {
		return nil, &Error{File: dir, Msg: "holds no Base*.cfg; a base directory needs at least one base"}
	}
	return bases, nil
}

func isDir(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
}
