package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// TestEnforcerCommandLine runs the one command line the libraries build for
// the enforcer (enforcer.Prefix, enforcer.Command) through the real binary:
// a renamed or dropped flag of `run` fails here, not first in a guest test.
func TestEnforcerCommandLine(t *testing.T) {
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	abi, err := enforcer.HostABI()
	if err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	// A kernel with restrict_self flags at all (ABI 7+) takes the log flag.
	row, _ := enforcer.Row(abi)
	for _, logSub := range []bool{false, true} {
		if logSub && row.RestrictFlags == 0 {
			continue
		}
		argv := append(enforcer.Command(enforcer.Prefix(bin, logSub), cfg), "/usr/bin/echo", "ran")
		// Quiet: the enforcer adds nothing to the command's own stderr.
		if code, out, errs := runBin(t, argv[0], nil, argv[1:]...); code != 0 || out != "ran\n" || errs != "" {
			t.Errorf("%q = %d, %q, %q; want 0, ran and nothing on stderr", argv, code, out, errs)
		}
	}
}
