package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/debian"
)

// Installed is one package dpkg reports installed.
type Installed struct {
	Name, Version, Arch string
}

// Manifest is the sorted list of installed packages of a root.
type Manifest []Installed

// ParseDpkgStatus reads a dpkg status file (var/lib/dpkg/status) and returns
// the packages whose state is "installed", sorted by name and architecture.
// Stanzas in other states (config-files, half-installed, …) are left out;
// an installed stanza lacking Package or Version is an error.
func ParseDpkgStatus(src []byte) (Manifest, error) {
	ps, err := debian.Paragraphs(src)
	if err != nil {
		return nil, fmt.Errorf("dpkg status: %w", err)
	}
	var m Manifest
	for i, p := range ps {
		st := strings.Fields(p["status"])
		if len(st) != 3 || st[2] != "installed" {
			continue
		}
		if p["package"] == "" || p["version"] == "" {
			return nil, fmt.Errorf("dpkg status paragraph %d: an installed package without Package or Version", i+1)
		}
		m = append(m, Installed{Name: p["package"], Version: p["version"], Arch: p["architecture"]})
	}
	sort.Slice(m, func(i, j int) bool {
		if m[i].Name != m[j].Name {
			return m[i].Name < m[j].Name
		}
		return m[i].Arch < m[j].Arch
	})
	return m, nil
}

// Render writes one `name=version arch` line per package.
func (m Manifest) Render() []byte {
	var b strings.Builder
	for _, p := range m {
		fmt.Fprintf(&b, "%s=%s %s\n", p.Name, p.Version, p.Arch)
	}
	return []byte(b.String())
}

// Hash is "sha256:" and the hex SHA-256 of Render's bytes: the image's
// content identity.
func (m Manifest) Hash() string {
	s := sha256.Sum256(m.Render())
	return "sha256:" + hex.EncodeToString(s[:])
}

// Recipe renders the manifest as the package lines of a recipe for suite:
// the closure to commit as images/<name>/packages.txt after a --lock build.
func (m Manifest) Recipe(suite string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "suite %s\n", suite)
	for _, p := range m {
		fmt.Fprintf(&b, "%s=%s\n", p.Name, p.Version)
	}
	return []byte(b.String())
}

// Diff compares the installed packages with the recipe. With allowExtra, an
// installed package the recipe does not list is not a difference. Every
// difference is one line, sorted by package name.
func (m Manifest) Diff(r *Recipe, allowExtra bool) []string {
	have := map[string]string{}
	for _, p := range m {
		have[p.Name] = p.Version
	}
	var out []string
	listed := map[string]bool{}
	for _, p := range r.Packages {
		listed[p.Name] = true
		v, ok := have[p.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: listed at %s, not installed", p.Name, p.Version))
		case v != p.Version:
			out = append(out, fmt.Sprintf("%s: listed at %s, installed %s", p.Name, p.Version, v))
		}
	}
	if !allowExtra {
		for _, p := range m {
			if !listed[p.Name] {
				out = append(out, fmt.Sprintf("%s: installed %s, not listed", p.Name, p.Version))
			}
		}
	}
	sort.Strings(out)
	return out
}
