package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
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
		{[]string{"observe", "--key", "k", "--exercises", "e", "--path-sets", "p", "--tcg-time-factor", "0"}, "--tcg-time-factor 0: want 1 to 100"},
		{[]string{"observe", "--key", "k", "--exercises", "e", "--path-sets", "p", "--tcg-time-factor", "101"}, "--tcg-time-factor 101: want 1 to 100"},
		{[]string{"observe", "--in-guest", "--key", "k", "--exercises", "e", "--path-sets", "p"}, "needs --out"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), tc.args, &cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q = %d, stderr %q; want %d naming %q", tc.args, code, errb.String(), cli.ExitUsage, tc.want)
		}
	}
}

// TestObserveAllKeys: --key all walks every key of the exercise tree in
// key order, each with its own <path-sets>/<key>; a key without that
// directory is indeterminate and does not stop the others (no guest boots
// here: no key has one). In the guest, all is a usage error.
func TestObserveAllKeys(t *testing.T) {
	ps := t.TempDir()
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"observe", "--key", "all", "--exercises", "../../testdata/exercises", "--path-sets", ps},
		&cli.Stdio{Out: &out, Err: &errb})
	if code != cli.ExitIndeterminate {
		t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, cli.ExitIndeterminate, out.String(), errb.String())
	}
	// The keys are the tree's directories, read here apart from the code
	// under test (os.ReadDir sorts them by name).
	ents, err := os.ReadDir("../../testdata/exercises")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range ents {
		if e.IsDir() {
			keys = append(keys, e.Name())
		}
	}
	last := -1
	for _, k := range keys {
		i := strings.Index(out.String(), "key "+k+": path set "+filepath.Join(ps, k))
		if i < last || !strings.Contains(errb.String(), "key "+k+": ") {
			t.Errorf("key %s not visited in order, or not reported: stdout %q, stderr %q", k, out.String(), errb.String())
		}
		last = i
	}
	if !strings.Contains(out.String(), "every key ("+strings.Join(keys, ", ")+"): status 3") {
		t.Errorf("no summary line: %q", out.String())
	}
	errb.Reset()
	if code := run(t.Context(), []string{"observe", "--in-guest", "--out", t.TempDir(), "--key", "all", "--exercises", "e", "--path-sets", "p"},
		&cli.Stdio{Out: &out, Err: &errb}); code != cli.ExitUsage || !strings.Contains(errb.String(), "the guest observes one key") {
		t.Errorf("--in-guest --key all = %d, %q; want a usage error", code, errb.String())
	}
}

// TestEachKeyInterrupted: an interruption during a key that then ends well
// stops the walk, and the keys left unvisited make the status
// indeterminate, never 0 (pruneAll and observeAll share eachKey).
func TestEachKeyInterrupted(t *testing.T) {
	const root = "../../testdata/exercises"
	keys, err := exercise.EveryKey(root, allKeys)
	if err != nil || len(keys) < 2 {
		t.Fatalf("keys of %s: %v, %v; want two or more", root, keys, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var ran []string
	var out, errb bytes.Buffer
	code := pruneAll(ctx, &cli.Stdio{Out: &out, Err: &errb}, root, t.TempDir(), func(key, _ string) int {
		ran = append(ran, key)
		cancel() // the signal arrives while the first key ends well
		return cli.ExitOK
	})
	if code != cli.ExitIndeterminate || strings.Join(ran, ",") != keys[0] {
		t.Errorf("status %d after keys %v; want %d after %s alone", code, ran, cli.ExitIndeterminate, keys[0])
	}
	if !strings.Contains(errb.String(), "interrupted after key "+keys[0]+"; not run: "+strings.Join(keys[1:], ", ")) ||
		!strings.Contains(out.String(), "every key ("+strings.Join(keys, ", ")+"): status 3") {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
}
