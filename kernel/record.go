package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// BuilderVersion names the build steps this package runs; bump it whenever
// they change what a build produces, so old cache entries stop matching.
const BuilderVersion = "lockstep-kernel-builder 2"

// KeyInputs is everything a cache key covers.
type KeyInputs struct {
	PinRow   string // the pin's row as written (whitespace-normalised)
	Fragment []byte // the configuration fragment's bytes
	Builder  string // BuilderVersion
	Compiler string // first line of `gcc --version`
	Make     string // first line of `make --version`
	Binutils string // first line of `ld --version`: the assembler and linker write every byte
}

// Key derives the cache key: SHA-256, in hex, over each input prefixed by its
// name and length, so no two different input sets can collide by shifting
// bytes from one field to the next.
func Key(in KeyInputs) string {
	h := sha256.New()
	for _, f := range []struct {
		name string
		val  []byte
	}{
		{"pin", []byte(in.PinRow)},
		{"fragment", in.Fragment},
		{"builder", []byte(in.Builder)},
		{"compiler", []byte(in.Compiler)},
		{"make", []byte(in.Make)},
		{"binutils", []byte(in.Binutils)},
	} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f.val)))
		h.Write([]byte(f.name))
		h.Write(n[:])
		h.Write(f.val)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Record is build.txt: what was built, from what, with what, and the hashes
// a restored kernel is checked against.
type Record struct {
	Key            string // the cache key, equal to the directory name
	Pin            string // the pin row
	Version        string // the pin's kernel version
	ABI            int    // the Landlock ABI the pin promises
	Source         string // Pin.Describe
	SourceSHA256   string // the downloaded file's SHA-256
	InnerSHA256    string // debian: the inner tarball's SHA-256, else ""
	FragmentSHA256 string
	Builder        string
	Compiler       string
	Make           string
	Binutils       string // "" in records older than builder 2
	BzImageSHA256  string
	BzImageSize    int64
	ConfigSHA256   string
	KernelVersion  string // the bzImage header's version string
	Duration       string // wall time of fetch+configure+build, e.g. "7m31s"
	BuildDuration  string // wall time of `make bzImage` alone
	BuildCPU       string // user+system CPU time of `make bzImage` and its compilers; "" in older records
	Jobs           int    // make -j
	Built          string // RFC 3339 UTC time the build finished
}

const recordMagic = "# lockstep kernel build record (build.txt); verified on every restore"

var recordFields = []struct {
	name string
	get  func(r *Record) *string
}{
	{"key", func(r *Record) *string { return &r.Key }},
	{"pin", func(r *Record) *string { return &r.Pin }},
	{"version", func(r *Record) *string { return &r.Version }},
	{"source", func(r *Record) *string { return &r.Source }},
	{"source-sha256", func(r *Record) *string { return &r.SourceSHA256 }},
	{"inner-sha256", func(r *Record) *string { return &r.InnerSHA256 }},
	{"fragment-sha256", func(r *Record) *string { return &r.FragmentSHA256 }},
	{"builder", func(r *Record) *string { return &r.Builder }},
	{"compiler", func(r *Record) *string { return &r.Compiler }},
	{"make", func(r *Record) *string { return &r.Make }},
	{"binutils", func(r *Record) *string { return &r.Binutils }},
	{"bzimage-sha256", func(r *Record) *string { return &r.BzImageSHA256 }},
	{"config-sha256", func(r *Record) *string { return &r.ConfigSHA256 }},
	{"kernel-version", func(r *Record) *string { return &r.KernelVersion }},
	{"duration", func(r *Record) *string { return &r.Duration }},
	{"build-duration", func(r *Record) *string { return &r.BuildDuration }},
	{"build-cpu", func(r *Record) *string { return &r.BuildCPU }},
	{"built", func(r *Record) *string { return &r.Built }},
}

// Marshal renders build.txt.
func (r *Record) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(recordMagic + "\n")
	for _, f := range recordFields {
		fmt.Fprintf(&b, "%s: %s\n", f.name, *f.get(r))
		if f.name == "version" {
			fmt.Fprintf(&b, "abi: %d\n", r.ABI)
		}
		if f.name == "bzimage-sha256" {
			fmt.Fprintf(&b, "bzimage-size: %d\n", r.BzImageSize)
		}
		if f.name == "build-duration" {
			fmt.Fprintf(&b, "jobs: %d\n", r.Jobs)
		}
	}
	return b.Bytes()
}

// ParseRecord parses build.txt. Unknown keys and missing hashes are errors:
// a record that cannot vouch for the bzImage is no record.
func ParseRecord(src []byte) (*Record, error) {
	lines := strings.Split(string(src), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != recordMagic {
		return nil, fmt.Errorf("line 1 is %q, want %q", firstLine(string(src)), recordMagic)
	}
	r := &Record{}
	byName := map[string]*string{}
	for _, f := range recordFields {
		byName[f.name] = f.get(r)
	}
	var problems []string
	seen := map[string]bool{}
	for i, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			k, v, ok = strings.Cut(line, ":")
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d: %q is not key: value", i+2, line))
			continue
		}
		seen[k] = true
		switch k {
		case "abi":
			if _, err := fmt.Sscanf(v, "%d", &r.ABI); err != nil {
				problems = append(problems, fmt.Sprintf("line %d: abi %q is not a number", i+2, v))
			}
		case "bzimage-size":
			if _, err := fmt.Sscanf(v, "%d", &r.BzImageSize); err != nil {
				problems = append(problems, fmt.Sprintf("line %d: bzimage-size %q is not a number", i+2, v))
			}
		case "jobs":
			if _, err := fmt.Sscanf(v, "%d", &r.Jobs); err != nil {
				problems = append(problems, fmt.Sprintf("line %d: jobs %q is not a number", i+2, v))
			}
		default:
			p, ok := byName[k]
			if !ok {
				problems = append(problems, fmt.Sprintf("line %d: unknown key %q", i+2, k))
				continue
			}
			*p = v
		}
	}
	var missing []string
	for _, k := range []string{"key", "pin", "version", "bzimage-sha256", "config-sha256"} {
		if !seen[k] || *byName[k] == "" {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		problems = append(problems, "missing "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("build.txt: %s", strings.Join(problems, "; "))
	}
	return r, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
