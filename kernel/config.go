package kernel

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
)

//go:embed fragment.config
var fragment []byte

// Fragment returns the configuration fragment applied after `make tinyconfig`.
func Fragment() []byte { return append([]byte(nil), fragment...) }

// FragmentSHA256 is the SHA-256 of the embedded fragment (before any
// version's overlay), lower-case hex.
func FragmentSHA256() string { return sha256Hex(fragment) }

// RequiredOptions returns the lines that must appear verbatim in a kernel's
// .config: every CONFIG_X=value line of fragment, in order. Comment lines
// (including "# CONFIG_X is not set") are not requirements.
func RequiredOptions(fragment []byte) []string {
	var req []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(fragment), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "CONFIG_") || !strings.Contains(line, "=") || seen[line] {
			continue
		}
		seen[line] = true
		req = append(req, line)
	}
	return req
}

// MissingOptions returns the required lines config lacks, in the order of
// required. A line counts only when it appears exactly, so CONFIG_X=m or a
// different string value is missing too.
func MissingOptions(config []byte, required []string) []string {
	have := map[string]bool{}
	for _, line := range strings.Split(string(config), "\n") {
		have[strings.TrimRight(line, "\r")] = true
	}
	var missing []string
	for _, r := range required {
		if !have[r] {
			missing = append(missing, r)
		}
	}
	return missing
}

// ErrUnfit means a kernel configuration lacks options the guest needs; the CLI
// maps it to exit 3.
var ErrUnfit = errors.New("kernel configuration unfit")

// UnfitError lists every required option a configuration lacks, each with
// what the configuration says instead.
type UnfitError struct {
	Config  string   // the .config that was checked
	Missing []string // required lines, e.g. CONFIG_PVH=y
	Found   []string // per missing line, what config has for that symbol ("not set" or its line)
}

func (e *UnfitError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		parts[i] = fmt.Sprintf("%s (have %s)", m, e.Found[i])
	}
	return fmt.Sprintf("%s lacks %d required option(s): %s", e.Config, len(e.Missing), strings.Join(parts, ", "))
}

// Is makes errors.Is(err, ErrUnfit) true.
func (e *UnfitError) Is(target error) bool { return target == ErrUnfit }

// CheckConfig returns an *UnfitError naming every required option config
// lacks, or nil. name is the file the config came from, for the message.
func CheckConfig(name string, config []byte, required []string) error {
	missing := MissingOptions(config, required)
	if len(missing) == 0 {
		return nil
	}
	e := &UnfitError{Config: name, Missing: missing}
	for _, m := range missing {
		e.Found = append(e.Found, symbolState(config, m[:strings.IndexByte(m, '=')]))
	}
	return e
}

// symbolState says what config has for sym: its line, or "not set".
func symbolState(config []byte, sym string) string {
	for _, line := range strings.Split(string(config), "\n") {
		if strings.HasPrefix(line, sym+"=") {
			return line
		}
	}
	return "not set"
}
