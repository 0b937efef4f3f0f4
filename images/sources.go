package images

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Source is one `deb` source of the machine's apt configuration.
type Source struct {
	URI        string
	Suites     []string
	Components []string
	// From names the file (and line) the source was read from.
	From string
}

// ParseSourcesList parses the one-line format of sources.list(5). Only `deb`
// lines are returned; `deb-src`, comments and blank lines are skipped.
// Options in brackets are accepted and dropped.
func ParseSourcesList(file string, src []byte) ([]Source, error) {
	var out []Source
	for i, line := range strings.Split(string(src), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "deb-src" {
			continue
		}
		if f[0] != "deb" {
			return nil, fmt.Errorf("%s:%d: type %q is not deb or deb-src", file, i+1, f[0])
		}
		f = f[1:]
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			for len(f) > 0 {
				end := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if end {
					break
				}
			}
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%s:%d: a deb line needs a URI and a suite, got %q", file, i+1, strings.TrimSpace(line))
		}
		out = append(out, Source{URI: f[0], Suites: []string{f[1]}, Components: f[2:], From: fmt.Sprintf("%s:%d", file, i+1)})
	}
	return out, nil
}

// ParseDeb822Sources parses the deb822 format of sources.list(5) (.sources
// files). Stanzas without type deb, or with Enabled: no, are skipped.
func ParseDeb822Sources(file string, src []byte) ([]Source, error) {
	var out []Source
	fields := map[string]string{}
	start, last := 0, ""
	flush := func() error {
		defer func() { fields = map[string]string{}; last = "" }()
		if len(fields) == 0 {
			return nil
		}
		if strings.EqualFold(fields["enabled"], "no") {
			return nil
		}
		if !containsWord(fields["types"], "deb") {
			return nil
		}
		uris, suites := strings.Fields(fields["uris"]), strings.Fields(fields["suites"])
		if len(uris) == 0 || len(suites) == 0 {
			return fmt.Errorf("%s:%d: a deb stanza needs URIs and Suites", file, start)
		}
		for _, u := range uris {
			out = append(out, Source{URI: u, Suites: suites, Components: strings.Fields(fields["components"]), From: fmt.Sprintf("%s:%d", file, start)})
		}
		return nil
	}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		if len(fields) == 0 {
			start = i + 1
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				return nil, fmt.Errorf("%s:%d: continuation line before any field", file, i+1)
			}
			fields[last] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%s:%d: %q is not a `Field: value` line", file, i+1, line)
		}
		last = strings.ToLower(strings.TrimSpace(k))
		fields[last] = strings.TrimSpace(v)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func containsWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
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
// configuration below root: etc/apt/sources.list, then the .list and
// .sources files of etc/apt/sources.list.d in name order (other names, such
// as *.disabled, are ignored as apt ignores them).
func HostSources(root string) ([]Source, error) {
	var out []Source
	main := filepath.Join(root, "etc/apt/sources.list")
	if b, err := os.ReadFile(main); err == nil {
		s, err := ParseSourcesList(main, b)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	dir := filepath.Join(root, "etc/apt/sources.list.d")
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		var parse func(string, []byte) ([]Source, error)
		switch filepath.Ext(n) {
		case ".list":
			parse = ParseSourcesList
		case ".sources":
			parse = ParseDeb822Sources
		default:
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read apt sources: %w", err)
		}
		s, err := parse(p, b)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
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
		if len(s.Components) > 0 && !containsWord(strings.Join(s.Components, " "), "main") {
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
