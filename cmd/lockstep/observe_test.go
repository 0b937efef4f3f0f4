package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestObserveUsage: the required flags, stray arguments, a bad accelerator
// and --in-guest outside a guest without --out are usage errors (2) that
// name the problem.
func TestObserveUsage(t *testing.T) {
	t.Setenv("LOCKSTEP_GUEST", "")
	os.Unsetenv("LOCKSTEP_GUEST")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"observe"}, "--key, --exercises and --path-sets are required"},
		{[]string{"observe", "--key", "k", "--exercises", "e"}, "are required"},
		{[]string{"observe", "--key", "k", "--exercises", "e", "--path-sets", "p", "extra"}, "unexpected arguments"},
		{[]string{"observe", "--key", "k", "--exercises", "e", "--path-sets", "p", "--accel", "xen"}, `--accel "xen"`},
		{[]string{"observe", "--in-guest", "--key", "k", "--exercises", "e", "--path-sets", "p"}, "needs --out"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), tc.args, &stdio{out: &out, err: &errb}); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q = %d, stderr %q; want %d naming %q", tc.args, code, errb.String(), exitUsage, tc.want)
		}
	}
}
