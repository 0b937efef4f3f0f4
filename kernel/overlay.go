package kernel

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// overlays adjust the fragment for newer kernels by data: fragment-X.Y.config
// applies to every version X.Y and later, in version order. A line
// "-CONFIG_A=v" removes that exact line from the fragment (a renamed or
// dropped option); every other line is appended.
//
//go:embed fragment-*.config
var overlays embed.FS

// overlay is one parsed fragment-X.Y.config.
type overlay struct {
	name         string
	major, minor int
	remove       []string
	add          []byte
}

func parseOverlays(fsys fs.FS) ([]overlay, error) {
	names, err := fs.Glob(fsys, "fragment-*.config")
	if err != nil {
		return nil, err
	}
	var out []overlay
	for _, n := range names {
		v := strings.TrimSuffix(strings.TrimPrefix(n, "fragment-"), ".config")
		maj, min, ok := parseMajorMinor(v)
		if !ok {
			return nil, fmt.Errorf("overlay %s: want fragment-<major>.<minor>.config", n)
		}
		raw, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		o := overlay{name: n, major: maj, minor: min}
		for _, line := range strings.SplitAfter(string(raw), "\n") {
			if r, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
				o.remove = append(o.remove, r)
				continue
			}
			o.add = append(o.add, line...)
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].major != out[j].major {
			return out[i].major < out[j].major
		}
		return out[i].minor < out[j].minor
	})
	return out, nil
}

func parseMajorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	return maj, min, err1 == nil && err2 == nil
}

// FragmentFor returns the fragment as applied to a kernel of version:
// base with every overlay for that version applied. For a version no overlay
// covers it is base itself, byte for byte, so adding an overlay for a newer
// kernel changes no older pin's cache key.
func FragmentFor(version string, base []byte) ([]byte, error) {
	return fragmentFor(overlays, version, base)
}

func fragmentFor(fsys fs.FS, version string, base []byte) ([]byte, error) {
	maj, min, ok := parseMajorMinor(version)
	if !ok {
		return nil, fmt.Errorf("fragment for %q: not a kernel version", version)
	}
	ovs, err := parseOverlays(fsys)
	if err != nil {
		return nil, err
	}
	out := base
	for _, o := range ovs {
		if o.major > maj || (o.major == maj && o.minor > min) {
			continue
		}
		lines := strings.SplitAfter(string(out), "\n")
		for _, r := range o.remove {
			i := indexLine(lines, r)
			if i < 0 {
				return nil, fmt.Errorf("overlay %s removes %q, which the fragment does not hold", o.name, r)
			}
			lines = append(lines[:i], lines[i+1:]...)
		}
		s := strings.Join(lines, "")
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		out = append([]byte(s+"\n"), o.add...)
	}
	return out, nil
}

func indexLine(lines []string, want string) int {
	for i, l := range lines {
		if strings.TrimSpace(l) == want {
			return i
		}
	}
	return -1
}
