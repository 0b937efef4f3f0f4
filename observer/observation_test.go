package observer

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func TestGrantRowsRender(t *testing.T) {
	p, err := policy.Parse("t.cfg", []byte("# c\n[read]\n/etc\n[bind]\nallow 5000 udp\nallow 80\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(GrantRows(p), ";")
	want := "[read] /etc;[bind] allow 80;[bind] allow 5000 udp"
	if got != want {
		t.Errorf("GrantRows = %q, want %q", got, want)
	}
}
