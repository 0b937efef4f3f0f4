package orchestrate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// SidecarRows checks an ABI-10 sidecar's bytes and returns its rows: the
// file must parse as a policy, hold nothing but [bind] rows, and every row
// must read exactly "allow <port> udp" with a canonical port 0-65535
// ("allow 00 udp", "allow 007 udp", "allow 65536 udp", non-ASCII digits,
// a tcp row and any other section are refused). Comment lines are allowed.
func SidecarRows(data []byte) ([]policy.BindRule, error) {
	p, err := policy.Parse("sidecar", data)
	if err != nil {
		return nil, fmt.Errorf("it is not a valid policy: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	var extra []string
	for _, s := range policy.FilesystemSections {
		if len(p.Paths(s)) > 0 {
			extra = append(extra, "["+string(s)+"]")
		}
	}
	if len(p.Connect) > 0 {
		extra = append(extra, "[connect]")
	}
	if len(p.Limits) > 0 {
		extra = append(extra, "[limits]")
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("it has %s rows; a sidecar holds [bind] allow <port> udp rows only", strings.Join(extra, ", "))
	}
	// The parser already refuses leading zeros and ports above 65535; the
	// rows are re-read as written so that only the exact shape passes.
	var bad []string
	for _, line := range strings.Split(string(data), "\n") {
		content, _, _ := strings.Cut(line, "#")
		content = strings.TrimSpace(content)
		if content == "" || content == "[bind]" {
			continue
		}
		if _, ok := policy.UDPBindRow(content); !ok {
			bad = append(bad, fmt.Sprintf("%q", content))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("row %s is not allow <port> udp", strings.Join(bad, ", "))
	}
	if len(p.Bind) == 0 {
		return nil, errors.New("it holds no row; a record that adds no row names no sidecar")
	}
	return p.Bind, nil
}

// sidecarRowLines returns the lines of a sidecar that are not comments (a
// line starting with "#"), as Phobos's workflow compares two guests' files.
func sidecarRowLines(data []byte) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
