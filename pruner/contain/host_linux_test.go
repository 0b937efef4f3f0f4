package contain

import (
	"os"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// TestExecuteSmallMemLimit runs the containment checks for a policy whose
// mem_mb (512, the pruner's floor) is below what the Go probe needs to
// start: before, every check failed "the probe did not start under the
// policy" ("fatal error: failed to reserve page summary memory"); now the
// mem_mb check is unchecked, naming why, and the others run and hold.
func TestExecuteSmallMemLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the canaries live in /root: needs root")
	}
	if abi, err := enforcer.HostABI(); err != nil || abi < 1 {
		t.Skipf("no Landlock here (ABI %d, %v)", abi, err)
	}
	bin := lockstepbin.Build(t)
	p, err := policy.Parse("t.cfg", []byte("[read]\n/usr\n/etc\n[execute]\n/usr/bin\n/usr/lib\n/usr/lib64\n[limits]\nmem_mb=512\nnofile=64\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, failed, err := Execute(t.Context(), p, Setup{Probe: []string{bin, Verb}, Enforcer: []string{bin, "run", "-q"}, ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Execute under mem_mb=512: %v", err)
	}
	if len(failed) != 0 {
		t.Errorf("checks that did not hold: %v", failed)
	}
	got := map[string]string{}
	for _, r := range res {
		got[r.Name] = r.Unchecked
		if r.Name == "limit nofile" && !r.Refused {
			t.Errorf("limit nofile not refused: %+v", r)
		}
	}
	if u, ok := got["limit mem_mb"]; !ok || !strings.Contains(u, "needs to start") {
		t.Errorf("limit mem_mb = %q (present %v), want unchecked: below what the probe needs to start", u, ok)
	}
	if u, ok := got["limit nofile"]; !ok || u != "" {
		t.Errorf("limit nofile = %q (present %v), want checked", u, ok)
	}
}
