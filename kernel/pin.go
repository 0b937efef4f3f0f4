package kernel

import (
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/lockstep-sandbox/lockstep/internal/debian"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// DefaultPin is the kernel a guest boots unless told otherwise.
const DefaultPin = "7.2.13"

// PinsFile is the name the embedded pin table is reported under.
const PinsFile = "kernel/pins.txt"

//go:embed pins.txt
var pinsTxt []byte

// PinsSHA256 is the SHA-256 of the embedded pin table, lower-case hex: what
// `lockstep version` reports, so a bug report names the pins it ran with.
func PinsSHA256() string { return sha256Hex(pinsTxt) }

// Source kinds a pin may name.
const (
	// SourceDebian is a Debian linux-source package fetched with apt-get
	// download; its tarball is a member of the .deb.
	SourceDebian = "debian"
	// SourceURL is a tarball at an https://, http:// or file:// URL.
	SourceURL = "url"
	// SourceDebianImage is Debian's prebuilt kernel package (linux-image-…),
	// fetched like SourceDebian; its vmlinuz (Inner) boots as it is, with
	// the package's own modules, nothing is built.
	SourceDebianImage = "debian-image"
)

// Pin is one row of the pin table: a kernel version, where its source comes
// from, the SHA-256 that source must have and the Landlock ABI the built
// kernel must offer.
type Pin struct {
	Version string // the pin's name: a kernel version, e.g. "7.2.13" (a debian-image pin: any name, e.g. "6.1.0-57-amd64")
	ABI     int    // Landlock ABI the kernel must offer
	Source  string // SourceDebian or SourceURL

	Package        string // debian, debian-image: binary package name, e.g. "linux-source-7.2"
	PackageVersion string // debian, debian-image: package version, e.g. "7.2.13-1"
	Suite          string // debian, debian-image: suite to fetch from, e.g. "sid"
	Inner          string // debian: path of the tarball inside the .deb; debian-image: of the vmlinuz
	InnerSHA256    string // debian, debian-image: SHA-256 of that member

	URL string // url: where the tarball is

	SHA256 string // SHA-256 of the downloaded file (.deb or tarball), lower-case hex

	File string // the pin file it came from
	Line int    // its line there
	Row  string // the row as written, whitespace-normalised; part of the cache key
}

// PinError is one problem in a pin file, with its position.
type PinError struct {
	File string
	Line int
	Msg  string
}

func (e *PinError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// PinErrors is every problem found in a pin file, sorted by line.
type PinErrors []*PinError

func (l PinErrors) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

var (
	versionRE = lazyre.New(`^[0-9]+\.[0-9]+(\.[0-9]+)?(-rc[0-9]+)?$`)
	sha256RE  = lazyre.New(`^[0-9a-f]{64}$`)
	nameRE    = lazyre.New(`^[a-z0-9][a-z0-9.+-]*$`)
)

// fields each source kind requires; any other key is refused.
var pinKeys = map[string][]string{
	SourceDebian:      {"abi", "source", "package", "version", "suite", "sha256", "inner", "inner-sha256"},
	SourceURL:         {"abi", "source", "url", "sha256"},
	SourceDebianImage: {"abi", "source", "package", "version", "suite", "sha256", "inner", "inner-sha256"},
}

// ParsePins parses a pin table. Every bad row is reported, each with its line,
// in one PinErrors; on error no pins are returned.
func ParsePins(file string, src []byte) ([]Pin, error) {
	var pins []Pin
	var errs PinErrors
	seen := map[string]int{}
	for i, line := range strings.Split(string(src), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) {
			errs = append(errs, &PinError{File: file, Line: n, Msg: fmt.Sprintf(format, a...)})
		}
		p, msgs := parsePinRow(line)
		for _, m := range msgs {
			bad("%s", m)
		}
		if len(msgs) > 0 {
			continue
		}
		if first, dup := seen[p.Version]; dup {
			bad("pin %s already defined on line %d", p.Version, first)
			continue
		}
		seen[p.Version] = n
		p.File, p.Line = file, n
		pins = append(pins, p)
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	if len(pins) == 0 {
		return nil, PinErrors{{File: file, Line: 1, Msg: "no pins defined"}}
	}
	return pins, nil
}

// parsePinRow parses one non-comment row and returns every problem in it.
func parsePinRow(line string) (Pin, []string) {
	fields := strings.Fields(line)
	p := Pin{Version: fields[0], Row: strings.Join(fields, " ")}
	var msgs []string
	kv := map[string]string{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			msgs = append(msgs, fmt.Sprintf("field %q is not key=value", f))
			continue
		}
		if _, dup := kv[k]; dup {
			msgs = append(msgs, fmt.Sprintf("key %s given twice", k))
			continue
		}
		kv[k] = v
	}
	p.Source = kv["source"]
	if p.Source == SourceDebianImage {
		if !nameRE.MatchString(p.Version) {
			msgs = append(msgs, fmt.Sprintf("name %q is not a pin name like 6.1.0-57-amd64 (lower-case letters, digits, '.', '+', '-')", p.Version))
		}
	} else if !versionRE.MatchString(p.Version) {
		msgs = append(msgs, fmt.Sprintf("version %q is not a kernel version like 7.2.13", p.Version))
	}
	want, ok := pinKeys[p.Source]
	if !ok {
		msgs = append(msgs, fmt.Sprintf("source=%q, want %s, %s or %s", p.Source, SourceDebian, SourceDebianImage, SourceURL))
		return p, msgs
	}
	var missing, unknown []string
	for _, k := range want {
		if _, ok := kv[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range kv {
		if !contains(want, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(missing) > 0 {
		msgs = append(msgs, fmt.Sprintf("source=%s pin lacks %s", p.Source, strings.Join(missing, ", ")))
	}
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("unknown keys %s (source=%s takes %s)", strings.Join(unknown, ", "), p.Source, strings.Join(want, ", ")))
	}
	if a, ok := kv["abi"]; ok {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 || n > 99 {
			msgs = append(msgs, fmt.Sprintf("abi=%q, want a Landlock ABI number 1..99", a))
		}
		p.ABI = n
	}
	checkSHA := func(k string) string {
		v, ok := kv[k]
		if ok && !sha256RE.MatchString(v) {
			msgs = append(msgs, fmt.Sprintf("%s=%q, want 64 lower-case hex digits", k, v))
		}
		return v
	}
	p.SHA256 = checkSHA("sha256")
	switch p.Source {
	case SourceDebian, SourceDebianImage:
		p.Package, p.PackageVersion, p.Suite, p.Inner = kv["package"], kv["version"], kv["suite"], kv["inner"]
		p.InnerSHA256 = checkSHA("inner-sha256")
		if p.Package != "" && !nameRE.MatchString(p.Package) {
			msgs = append(msgs, fmt.Sprintf("package=%q is not a Debian package name", p.Package))
		}
		if p.PackageVersion != "" {
			if err := debian.CheckVersion(p.PackageVersion); err != nil {
				msgs = append(msgs, "version="+err.Error())
			}
		}
		if p.Suite != "" && !nameRE.MatchString(p.Suite) {
			msgs = append(msgs, fmt.Sprintf("suite=%q is not a suite name", p.Suite))
		}
		if p.Inner != "" && (strings.HasPrefix(p.Inner, "/") || strings.Contains(p.Inner, "..")) {
			msgs = append(msgs, fmt.Sprintf("inner=%q must be a relative path inside the package", p.Inner))
		}
	case SourceURL:
		p.URL = kv["url"]
		if u, err := url.Parse(p.URL); p.URL != "" && (err != nil || !contains([]string{"https", "http", "file"}, u.Scheme) || u.Path == "") {
			msgs = append(msgs, fmt.Sprintf("url=%q, want an https://, http:// or file:// URL of a tarball", p.URL))
		}
	}
	return p, msgs
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

var embeddedPins = sync.OnceValues(func() ([]Pin, error) { return ParsePins(PinsFile, pinsTxt) })

// Pins returns the shipped pin table (embedded), in file order; AllPins
// adds the pins of pin files.
func Pins() []Pin {
	ps, err := embeddedPins()
	if err != nil {
		panic("BUG(kernel): embedded " + PinsFile + " does not parse: " + err.Error())
	}
	return ps
}

// ErrUnknownPin is returned by Lookup for a version that has no pin.
var ErrUnknownPin = errors.New("unknown kernel pin")

// Lookup returns the pin for version among AllPins; an empty version means
// DefaultPin. A pin file that does not parse is the error.
func Lookup(version string) (Pin, error) {
	all, err := AllPins()
	if err != nil {
		return Pin{}, err
	}
	return lookupIn(all, version)
}

func lookupIn(pins []Pin, version string) (Pin, error) {
	if version == "" {
		version = DefaultPin
	}
	var have []string
	for _, p := range pins {
		if p.Version == version {
			return p, nil
		}
		have = append(have, p.Version)
	}
	return Pin{}, fmt.Errorf("%w %q (pinned: %s)", ErrUnknownPin, version, strings.Join(have, ", "))
}

// Describe is the pin's source in one line, for listings and build.txt.
func (p Pin) Describe() string {
	switch p.Source {
	case SourceDebian:
		return fmt.Sprintf("debian %s=%s (%s)", p.Package, p.PackageVersion, p.Suite)
	case SourceDebianImage:
		return fmt.Sprintf("debian-image %s=%s (%s)", p.Package, p.PackageVersion, p.Suite)
	default:
		return p.URL
	}
}
