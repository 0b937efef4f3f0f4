package observer

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
)

// libDirs are where the dynamic loader looks for a library without a
// run path (Debian's multiarch directories first).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// StartNeeds lists the files, symlinks resolved, that starting bin needs:
// bin itself, its program interpreter and the shared libraries it names
// (DT_NEEDED, recursively), as the loader finds them. Landlock checks the
// resolved paths, so a policy that grants none of them cannot start bin.
func StartNeeds(bin string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) (string, bool) {
		r, err := filepath.EvalSymlinks(p)
		if err != nil || seen[r] {
			return r, false
		}
		seen[r] = true
		out = append(out, r)
		return r, true
	}
	var walk func(p string) error
	walk = func(p string) error {
		r, fresh := add(p)
		if !fresh {
			return nil
		}
		f, err := elf.Open(r)
		if err != nil {
			return fmt.Errorf("start needs of %s: %w", p, err)
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err == nil {
				add(string(trimNUL(b)))
			}
		}
		libs, _ := f.ImportedLibraries()
		for _, l := range libs {
			for _, d := range libDirs {
				q := filepath.Join(d, l)
				if _, err := os.Stat(q); err == nil {
					if err := walk(q); err != nil {
						return err
					}
					break
				}
			}
		}
		return nil
	}
	if err := walk(bin); err != nil {
		return nil, err
	}
	return out, nil
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
