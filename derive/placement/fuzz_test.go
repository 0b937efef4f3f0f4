package placement

import (
	"path"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// FuzzGrants checks the rules that must hold for any traced path: a grant
// names a carriable path; a widened grant is never / or a top-level
// directory; a write-class grant is never a specification ancestor nor a
// per-run name's directory; every grant is the object or an ancestor of it.
func FuzzGrants(f *testing.F) {
	for _, s := range []string{"/usr/bin/make", "/proc/12/maps", "/dev/pts/3", "/var/tmp/testing-dir/build/x",
		"/etc/passwd", "/var/tmp", "/a#b/c", "/proc/1/task/2/stat", "/usr", "/"} {
		f.Add(s, uint8(0), 12, 1)
		f.Add(s, uint8(2), 12, 2)
	}
	f.Fuzz(func(t *testing.T, p string, sec uint8, tgid, run int) {
		if p == "" || p[0] != '/' {
			return
		}
		p = path.Clean(p)
		s := policy.FilesystemSections[int(sec)%len(policy.FilesystemSections)]
		obs := []Observation{{Path: p, Section: s, Run: run, TGID: tgid, TID: tgid}}
		gs, rs := Grants(obs, env())
		if len(gs)+len(rs) != 1 {
			t.Fatalf("Grants(%q) gave %d grants and %d reports, want exactly one answer", p, len(gs), len(rs))
		}
		for _, g := range gs {
			if !Carriable(g.Path) {
				t.Errorf("grant on uncarriable %q", g.Path)
			}
			if g.Path != p && !policy.Beneath(p, g.Path) {
				t.Errorf("grant %q for %q is neither the object nor an ancestor", g.Path, p)
			}
			if g.Widened && Depth(g.Path) < MinimumDepth {
				t.Errorf("%q widened to %q (depth %d)", p, g.Path, Depth(g.Path))
			}
			if !IsReadClass(s) && (isSpecAncestor(g.Path) || strings.HasPrefix(g.Comment, "per-run")) {
				t.Errorf("write-class [%s] granted on %q (%s)", s, g.Path, g.Comment)
			}
		}
	})
}

func BenchmarkGrants(b *testing.B) {
	var obs []Observation
	for i := 0; i < 500; i++ {
		obs = append(obs, Observation{Path: "/usr/lib/x86_64-linux-gnu/lib" + string(rune('a'+i%26)) + ".so", Section: policy.Read, Run: 1 + i%3, TGID: 100 + i, TID: 100 + i})
		obs = append(obs, Observation{Path: "/proc/" + string(rune('1'+i%9)) + "00/maps", Section: policy.Read, Run: 1 + i%3, TGID: 100 + i, TID: 100 + i})
	}
	e := env()
	b.ReportAllocs()
	for b.Loop() {
		Grants(obs, e)
	}
}
