package version

import (
	"runtime/debug"
	"testing"
)

func TestFromInfo(t *testing.T) {
	rev := "dd11126d414e60475bc31ca6ddcc73d66052a106"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name     string
		info     debug.BuildInfo
		want     string
		modified bool
	}{
		{"tag", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("false")}, "v1.2.3", false},
		{"pseudo-version", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202000723-dd11126d414e+dirty"}, Settings: vcs("true")},
			"v0.0.0-20261202000723-dd11126d414e+dirty", true},
		{"devel, clean", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "devel-dd11126d414e", false},
		{"devel, modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "devel-dd11126d414e+dirty", true},
		{"no VCS", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel", false},
		{"no main version", debug.BuildInfo{}, "devel", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := fromInfo(&c.info)
			if got := b.String(); got != c.want {
				t.Errorf("String() = %q, want %q", got, c.want)
			}
			if b.Modified != c.modified {
				t.Errorf("Modified = %v, want %v", b.Modified, c.modified)
			}
		})
	}
}

// TestLinkerFallback: a build the go command did not stamp (a git
// worktree) takes the revision `make build` passed with -X, and the go
// command's own settings win over it.
func TestLinkerFallback(t *testing.T) {
	revision, modified = "0123456789abcdef0123", "true"
	t.Cleanup(func() { revision, modified = "", "" })
	b := fromInfo(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	if b.Revision != revision || !b.Modified || b.String() != "devel-0123456789ab+dirty" {
		t.Errorf("unstamped build = %+v (%s), want the -X revision, modified", b, b)
	}
	stamped := fromInfo(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba"}, {Key: "vcs.modified", Value: "false"}}})
	if stamped.Revision != "fedcba" || stamped.Modified {
		t.Errorf("stamped build = %+v, want the go command's settings", stamped)
	}
}

func TestDeps(t *testing.T) {
	b := fromInfo(&debug.BuildInfo{Deps: []*debug.Module{
		{Path: "example.com/a", Version: "v1.0.0"},
		{Path: "example.com/b", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/c", Version: "v2.0.0"}},
	}})
	if b.Deps["example.com/a"] != "v1.0.0" || b.Deps["example.com/b"] != "v2.0.0" {
		t.Errorf("Deps = %v, want a v1.0.0 and b replaced by v2.0.0", b.Deps)
	}
}
