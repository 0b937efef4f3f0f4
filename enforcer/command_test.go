package enforcer

import (
	"slices"
	"testing"
)

// TestCommand: the tail follows the prefix, and a prefix with room to spare
// (a library user's, reused for every run) is never written through.
func TestCommand(t *testing.T) {
	if got, want := Command(Prefix("/x/lockstep", true), "p.cfg"), []string{"/x/lockstep", "run", "-q", "--without", "mounts,pid", "--log-subprocesses", "--config", "p.cfg", "--"}; !slices.Equal(got, want) {
		t.Errorf("Command = %q, want %q", got, want)
	}
	prefix := make([]string, 2, 8)
	copy(prefix, []string{"/x/lockstep", Verb})
	a, b := Command(prefix, "a.cfg"), Command(prefix, "b.cfg")
	if a[3] != "a.cfg" || b[3] != "b.cfg" {
		t.Errorf("Command shares the prefix's array: %q and %q", a, b)
	}
}
