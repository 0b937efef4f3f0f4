//go:build linux

package verify

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// TestHostAll: every matrix comes back in the order given, each cell of
// its own key, from one pool of one guest at once; a kernel that cannot
// boot leaves every cell indeterminate with the harness's reason, never a
// pass. A matrix that cannot start is the error, naming its problem.
func TestHostAll(t *testing.T) {
	p, err := policy.Parse("p.cfg", []byte("[read]\n/usr\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := []Kernel{{Name: "missing", BzImage: t.TempDir() + "/no-bzImage"}}
	all := []HostOptions{
		{Policy: p, Kernels: k, Exercises: "../testdata/exercises", Key: "python"},
		{Policy: p, Kernels: k, Exercises: "../testdata/exercises", Key: "generic"},
	}
	res, err := HostAll(t.Context(), 1, all)
	if err != nil {
		t.Fatalf("HostAll: %v", err)
	}
	if len(res) != 2 || res[0].Key != "python" || res[1].Key != "generic" {
		t.Fatalf("HostAll = %d results; want python's then generic's", len(res))
	}
	for _, r := range res {
		if r.Parallel != 1 || len(r.Cells) != 1 || r.Status != StatusIndeterminate {
			t.Errorf("%s: parallel %d, %d cells, status %d; want 1, 1, indeterminate", r.Key, r.Parallel, len(r.Cells), r.Status)
			continue
		}
		if c := r.Cells[0]; c.Verdict != Indeterminate || !strings.Contains(c.Why, "the guest did not report") {
			t.Errorf("%s × %s = %s (%s); want indeterminate: the guest did not report", c.Kernel, c.Exercise, c.Verdict, c.Why)
		}
	}
	all[1].Only = []string{"no-such-exercise"}
	if _, err := HostAll(t.Context(), 1, all); err == nil || !strings.Contains(err.Error(), `"no-such-exercise"`) {
		t.Errorf("HostAll with an unknown exercise = %v; want it named", err)
	}
}
