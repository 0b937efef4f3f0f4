package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestNarrowed(t *testing.T) {
	p, err := Parse("p.cfg", []byte("[read]\n/a\n/b\n/c\n/d\n/e\n[write]\n/b\n[bind]\nallow 80 tcp\n[limits]\ntimeout=10\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, removed := Narrowed(p)
	if removed != 2 {
		t.Errorf("removed = %d, want 2", removed)
	}
	var paths []string
	for path := range n.FS {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"/a", "/c", "/e"}) {
		t.Errorf("kept %v, want /a /c /e", paths)
	}
	if len(n.Limits) != 0 || len(n.Bind) != 1 {
		t.Errorf("limits %v bind %v: want no limits, the bind rule kept", n.Limits, n.Bind)
	}
	if len(p.FS) != 5 {
		t.Errorf("Narrowed changed its input: %v", p.FS)
	}
	one, _ := Parse("one.cfg", []byte("[read]\n/a\n"))
	if _, removed := Narrowed(one); removed != 0 {
		t.Errorf("a one-entry policy: removed %d, want 0", removed)
	}
	w := WithBind(p, []int{5000, 5000})
	if len(w.Bind) != 2 || w.Bind[1] != (BindRule{Port: 5000, Transport: UDP}) || len(p.Bind) != 1 {
		t.Errorf("WithBind = %v (input %v)", w.Bind, p.Bind)
	}
	if !strings.Contains(string(w.Render()), "allow 5000 udp") {
		t.Errorf("rendered policy lacks the row:\n%s", w.Render())
	}
}
