package lockstepbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Package is the import path of the command.
const Package = "github.com/lockstep-sandbox/lockstep/cmd/lockstep"

// BuildTo builds the command, static (CGO_ENABLED=0), to path.
func BuildTo(path string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", path, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", Package, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Build builds the command into a temporary directory of tb (removed when
// tb ends) and returns its path; a failed build fails tb.
func Build(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "lockstep")
	if err := BuildTo(bin); err != nil {
		tb.Fatal(err)
	}
	return bin
}
