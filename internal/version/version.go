package version

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Build is what the binary knows about its own build.
type Build struct {
	// Module is the main module's version: a tag, a pseudo-version the go
	// command derived from the VCS, or "(devel)" when it could derive none.
	Module string `json:"module"`
	// Revision is the VCS commit the binary was built from, "" when the
	// build carried no VCS information (go test, -buildvcs=false).
	Revision string `json:"revision"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// Go is the toolchain that built the binary, e.g. "go1.26.8".
	Go string `json:"go"`
	// Deps maps each dependency's module path to its version (or its
	// replacement's).
	Deps map[string]string `json:"-"`
}

// revision and modified are set by `make build` (-ldflags -X) from git, for
// the checkouts the go command does not stamp: it finds a git tree only by a
// .git directory, so a `git worktree` (whose .git is a file) gets no vcs.*
// settings. The go command's own settings win where it gives them.
var revision, modified string

// unknown stands for a version the build information does not give.
const unknown = "unknown"

// Read returns this binary's build information. A binary without any
// (which the go command never builds) reports Module "unknown".
var Read = sync.OnceValue(func() Build {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{Module: unknown, Go: runtime.Version(), Deps: map[string]string{}}
	}
	return fromInfo(info)
})

func fromInfo(info *debug.BuildInfo) Build {
	b := Build{Module: info.Main.Version, Go: info.GoVersion, Deps: map[string]string{}}
	if b.Module == "" {
		b.Module = unknown
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	if b.Revision == "" {
		b.Revision, b.Modified = revision, modified == "true"
	}
	for _, d := range info.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		b.Deps[d.Path] = v
	}
	return b
}

// String is the one line that names a build: the module version when the
// go command stamped a real one, else "devel" and the revision's first 12
// hex digits, "+dirty" when the tree was modified.
func (b Build) String() string {
	if b.Module != "(devel)" && b.Module != unknown {
		return b.Module
	}
	if b.Revision == "" {
		return "devel"
	}
	s := "devel-" + short(b.Revision)
	if b.Modified {
		s += "+dirty"
	}
	return s
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is Read().String(): this binary's version line.
func String() string { return Read().String() }
