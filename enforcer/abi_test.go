package enforcer

import (
	"slices"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func TestHostABI(t *testing.T) {
	abi, err := HostABI()
	if err != nil {
		t.Fatalf("HostABI() error: %v (this machine's kernel must have Landlock)", err)
	}
	if abi < 1 {
		t.Fatalf("HostABI() = %d, want >= 1", abi)
	}
	if e, err := HostErrata(); err != nil || e < 0 {
		t.Errorf("HostErrata() = %d, %v; want a bitmask", e, err)
	}
	t.Logf("host Landlock ABI %d", abi)
}

// TestLandlockSections: every section landlock.Rights names is one the
// grammar knows, filesystem rights in path sections and network rights in
// [connect] or [bind], so SectionRights and the attribution's sections
// cannot lose a right to a misspelling.
func TestLandlockSections(t *testing.T) {
	for _, f := range landlock.Rights {
		for _, s := range f.Sections {
			ok := false
			switch f.Class {
			case landlock.ClassFS:
				ok = slices.Contains(policy.FilesystemSections, policy.Section(s))
			case landlock.ClassNet:
				ok = policy.Section(s) == policy.Connect || policy.Section(s) == policy.Bind
			}
			if !ok {
				t.Errorf("%s: section %q is not a %v section of the grammar", f.Right, s, f.Class)
			}
		}
	}
	var all uint64
	for _, m := range SectionRights {
		all |= m
	}
	if want := landlock.Mask(landlock.ClassFS, len(landlock.ABITable)) &^ (landlock.FSMakeChar | landlock.FSMakeBlock); all != want {
		t.Errorf("the sections grant %s, want every filesystem right but MAKE_CHAR and MAKE_BLOCK", FSRightNames(all))
	}
}
