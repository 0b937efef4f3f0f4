package control

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// TestCaptureEmpty replays the refusals of the first observed run of a
// prune (the generic exercise under a policy that grants nothing): bash's
// execve, with its ELF loader added, succeeds here, so it is Landlock's.
func TestCaptureEmpty(t *testing.T) {
	tr, err := strace.ParseFile("../../testdata/strace/generic-empty.strace")
	if err != nil {
		t.Fatal(err)
	}
	rs := attribute.Refusals(tr.Calls, attribute.Options{})
	if len(rs) == 0 {
		t.Fatal("no refusals")
	}
	for _, r := range rs {
		r = WithInterpreter(r)
		v := Replay(r, Options{})
		if !v.Landlock {
			t.Errorf("%v: %s", r, v.Reason)
		}
		if len(r.Paths) < 2 || r.Paths[0] != "/bin/bash" || !strings.Contains(r.Paths[1], "ld-linux") {
			t.Errorf("paths %q, want /bin/bash and its loader", r.Paths)
		}
	}
}
