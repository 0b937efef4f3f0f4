package mountinfo

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo: where it is mounted, its file
// system type and whether the mount is read-only.
type Mount struct {
	Point    string
	FSType   string
	ReadOnly bool
}

// Parse reads the lines of /proc/<pid>/mountinfo (proc(5)): mount
// ID, parent ID, major:minor, root, mount point, mount options, optional
// fields ended by "-", file system type, source, super options. Octal
// escapes in the mount point (\040 for a space) are undone.
func Parse(data []byte) ([]Mount, error) {
	var out []Mount
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMountLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func parseMountLine(line string) (Mount, error) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if len(f) < 6 || sep < 6 || sep+1 >= len(f) {
		return Mount{}, fmt.Errorf("want at least 6 fields, a \"-\" and the file system type, got %q", line)
	}
	point, err := unescapeOctal(f[4])
	if err != nil {
		return Mount{}, err
	}
	if !filepath.IsAbs(point) {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", point)
	}
	return Mount{Point: filepath.Clean(point), FSType: f[sep+1], ReadOnly: slices.Contains(strings.Split(f[5], ","), "ro")}, nil
}

// unescapeOctal undoes the kernel's \ooo escapes of space, tab, newline
// and backslash in a mountinfo path.
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("a cut-off escape in %q", s)
		}
		n, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("escape %q in %q: want three octal digits", s[i:i+4], s)
		}
		b.WriteByte(byte(n))
		i += 3
	}
	return b.String(), nil
}
