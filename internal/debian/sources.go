package debian

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"pault.ag/go/debian/control"
)

// Source is one entry of apt's sources: a stanza of a .sources file, or a
// line of a .list file.
type Source struct {
	Types      []string // "deb", "deb-src"
	URIs       []string
	Suites     []string
	Components []string
	SignedBy   string // the Signed-By option, "" when none
	Enabled    bool   // false for a stanza with Enabled: no
	From       string // file:line of the entry
}

// Is reports whether the entry has type t ("deb", "deb-src").
func (s Source) Is(t string) bool {
	for _, x := range s.Types {
		if x == t {
			return true
		}
	}
	return false
}

// ParseSources parses one apt source file: deb822 when its name ends in
// ".sources", else the one-line format. Every entry is returned, disabled
// ones and deb-src ones too; a line or stanza apt would refuse is an error
// naming its place.
func ParseSources(file string, src []byte) ([]Source, error) {
	if strings.HasSuffix(file, ".sources") {
		return parseDeb822Sources(file, src)
	}
	return parseOneLineSources(file, src)
}

// parseOneLineSources parses sources.list(5)'s one-line format.
func parseOneLineSources(file string, src []byte) ([]Source, error) {
	var out []Source
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] != "deb" && f[0] != "deb-src" {
			return nil, fmt.Errorf("%s:%d: type %q is not deb or deb-src", file, n, f[0])
		}
		s := Source{Types: f[:1], Enabled: true, From: fmt.Sprintf("%s:%d", file, n)}
		f = f[1:]
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			for len(f) > 0 {
				o := strings.Trim(f[0], "[]")
				if k, v, ok := strings.Cut(o, "="); ok && strings.EqualFold(k, "signed-by") {
					s.SignedBy = v
				}
				end := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if end {
					break
				}
			}
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%s:%d: a %s line needs a URI and a suite, got %q", file, n, s.Types[0], strings.TrimSpace(line))
		}
		s.URIs, s.Suites, s.Components = f[:1], f[1:2], f[2:]
		out = append(out, s)
	}
	return out, sc.Err()
}

// Paragraph is one deb822 paragraph (a stanza of a .sources file, of a
// dpkg status file, of a control file), its field names lower-cased:
// deb822 field names are case-insensitive.
type Paragraph map[string]string

// Paragraphs reads every paragraph of a deb822 document (comment lines
// dropped, continuation lines joined with newlines), in order. A line that
// is neither a field, a continuation nor blank is an error naming the
// paragraph.
func Paragraphs(src []byte) ([]Paragraph, error) {
	r, err := control.NewParagraphReader(bytes.NewReader(src), nil)
	if err != nil {
		return nil, err
	}
	var out []Paragraph
	for n := 1; ; n++ {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("paragraph %d: %w", n, err)
		}
		f := Paragraph{}
		for k, v := range p.Values {
			f[strings.ToLower(k)] = v
		}
		out = append(out, f)
	}
}

// parseDeb822Sources parses the deb822 format of sources.list(5).
func parseDeb822Sources(file string, src []byte) ([]Source, error) {
	ps, err := Paragraphs(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []Source
	for i, f := range ps {
		n := i + 1
		s := Source{Types: strings.Fields(f["types"]), URIs: strings.Fields(f["uris"]), Suites: strings.Fields(f["suites"]),
			Components: strings.Fields(f["components"]), SignedBy: strings.TrimSpace(f["signed-by"]),
			Enabled: !strings.EqualFold(strings.TrimSpace(f["enabled"]), "no"), From: fmt.Sprintf("%s: stanza %d", file, n)}
		if s.Enabled && (len(s.Types) == 0 || len(s.URIs) == 0 || len(s.Suites) == 0) {
			return nil, fmt.Errorf("%s: stanza %d needs Types, URIs and Suites", file, n)
		}
		out = append(out, s)
	}
	return out, nil
}

// maxSourceFile bounds one apt source file read.
const maxSourceFile = 1 << 20

// ReadAptSources reads every entry of the apt configuration directory dir
// (normally /etc/apt): sources.list, then sources.list.d's .list and
// .sources files in name order; other names (*.disabled, *.save) are
// ignored, as apt ignores them. Missing files are no error.
func ReadAptSources(dir string) ([]Source, error) {
	files := []string{filepath.Join(dir, "sources.list")}
	ents, err := os.ReadDir(filepath.Join(dir, "sources.list.d"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".list") || strings.HasSuffix(e.Name(), ".sources") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, filepath.Join(dir, "sources.list.d", n))
	}
	var out []Source
	for _, f := range files {
		b, err := safefile.ReadFile(f, maxSourceFile)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read apt sources: %w", err)
		}
		s, err := ParseSources(f, b)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// ArchiveURIs picks the URIs of the Debian archive proper from sources:
// enabled entries of type deb whose suites are not security suites (those
// have no sid) and that are signed by a Debian archive key, or name no key
// and only Debian suites (an unsigned Ubuntu entry, as older Ubuntu images
// write them, is not Debian's archive). Order follows the entries;
// duplicates and trailing slashes are dropped.
func ArchiveURIs(sources []Source) []string {
	var out []string
	for _, s := range sources {
		if !s.Enabled || !s.Is("deb") || !archiveEntry(s) {
			continue
		}
		for _, u := range s.URIs {
			u = strings.TrimRight(u, "/")
			if u != "" && !contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

func archiveEntry(s Source) bool {
	for _, su := range s.Suites {
		if strings.Contains(su, "security") {
			return false
		}
	}
	if s.SignedBy != "" {
		return strings.Contains(s.SignedBy, "debian-archive")
	}
	return allDebianSuites(s.Suites)
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// codenames are Debian's release names, from buzz to the announced ones,
// and its suite aliases. An unsigned source entry counts as Debian's
// archive only with one of them (plus a -updates, -backports or
// -proposed-updates suffix).
var codenames = map[string]bool{
	"buzz": true, "rex": true, "bo": true, "hamm": true, "slink": true, "potato": true, "woody": true,
	"sarge": true, "etch": true, "lenny": true, "squeeze": true, "wheezy": true, "jessie": true,
	"stretch": true, "buster": true, "bullseye": true, "bookworm": true, "trixie": true, "forky": true,
	"duke": true, "sid": true, "experimental": true, "oldoldstable": true, "oldstable": true,
	"stable": true, "testing": true, "unstable": true,
}

func allDebianSuites(suites []string) bool {
	if len(suites) == 0 {
		return false
	}
	for _, s := range suites {
		for _, suf := range []string{"-updates", "-backports", "-proposed-updates", "-backports-sloppy"} {
			s = strings.TrimSuffix(s, suf)
		}
		if !codenames[s] {
			return false
		}
	}
	return true
}
