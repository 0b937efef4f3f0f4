package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
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
	abi := featuretest.Require(t, featuretest.Landlock)
	row, _ := enforcer.Row(abi)
	prefixes := [][]string{enforcer.Prefix(bin, false), enforcer.EnforcePrefix(bin)}
	if row.RestrictFlags != 0 { // a kernel with restrict_self flags at all (ABI 7+) takes the log flag
		prefixes = append(prefixes, enforcer.Prefix(bin, true))
	}
	for _, prefix := range prefixes {
		argv := append(enforcer.Command(prefix, cfg), "/usr/bin/echo", "ran")
		// Quiet: the enforcer adds nothing to the command's own stderr.
		if code, out, errs := runBin(t, argv[0], nil, argv[1:]...); code != 0 || out != "ran\n" || errs != "" {
			t.Errorf("%q = %d, %q, %q; want 0, ran and nothing on stderr", argv, code, out, errs)
		}
	}
}
