package images

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/debian"
)

// Source is one enabled `deb` entry of the machine's apt configuration,
// with one URI.
type Source struct {
	URI        string
	Suites     []string
	Components []string
	// From names the file (and line or stanza) the source was read from.
	From string
}

// aptRoot is the directory below which the machine's apt configuration is
// read: LOCKSTEP_APT_ROOT, or /.
func aptRoot() string {
	if r := os.Getenv("LOCKSTEP_APT_ROOT"); r != "" {
		return r
	}
	return "/"
}

// HostSources reads every enabled `deb` source of the machine's apt
// configuration below root (etc/apt, read by debian.ReadAptSources), one
// Source per URI.
func HostSources(root string) ([]Source, error) {
	all, err := debian.ReadAptSources(filepath.Join(root, "etc/apt"))
	if err != nil {
		return nil, err
	}
	var out []Source
	for _, s := range all {
		if !s.Enabled || !s.Is("deb") {
			continue
		}
		for _, u := range s.URIs {
			out = append(out, Source{URI: u, Suites: s.Suites, Components: s.Components, From: s.From})
		}
	}
	return out, nil
}

// SuiteSource is a URI and one suite from it.
type SuiteSource struct {
	URI, Suite string
}

// SourcesFor picks, from the machine's sources, the URIs that serve suite
// and its -updates and -security companions with the main component. The
// first entry serves suite itself (debootstrap's mirror). It fails, naming
// what was read, when no source serves suite.
func SourcesFor(suite string, all []Source) ([]SuiteSource, error) {
	want := map[string]bool{suite: true, suite + "-updates": true, suite + "-security": true}
	var primary []SuiteSource
	var rest []SuiteSource
	seen := map[SuiteSource]bool{}
	for _, s := range all {
		if len(s.Components) > 0 && !slices.Contains(s.Components, "main") {
			continue
		}
		for _, su := range s.Suites {
			ss := SuiteSource{URI: strings.TrimRight(s.URI, "/"), Suite: su}
			if !want[su] || seen[ss] {
				continue
			}
			seen[ss] = true
			if su == suite {
				primary = append(primary, ss)
			} else {
				rest = append(rest, ss)
			}
		}
	}
	if len(primary) == 0 {
		var have []string
		for _, s := range all {
			have = append(have, strings.Join(s.Suites, ",")+" ("+s.From+")")
		}
		return nil, fmt.Errorf("no apt source of this machine serves suite %s with component main; have: %s", suite, strings.Join(have, "; "))
	}
	return append(primary, rest...), nil
}
