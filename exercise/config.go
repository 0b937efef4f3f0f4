package exercise

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// ConfigFile is the name of an exercise's optional configuration file.
const ConfigFile = "prune.json"

// DefaultCompiledProgramsDirectory is the compiled-programs directory, relative
// to the working directory, when prune.json names none.
const DefaultCompiledProgramsDirectory = "assignment"

// DefaultReportGlobs are where JUnit reports are looked for when prune.json
// has no report_globs: Gradle, Maven Surefire, and the test-reports folder.
var DefaultReportGlobs = []string{"build/test-results/**/*.xml", "target/surefire-reports/*.xml", "test-reports/*.xml"}

var (
	keyPattern      = lazyre.New(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seedPattern     = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]*\.cfg$`)
	manifestPattern = lazyre.New(`^[A-Za-z0-9._-]+$`)
	hostPattern     = lazyre.New(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*:([0-9]{1,5})( (tcp|udp))?$`)
)

// ValidKey reports whether key is a language key: lower-case letters and
// digits in dash-separated words. Keys end up in file names and on kernel
// command lines.
func ValidKey(key string) bool { return keyPattern.MatchString(key) }

// PinnedReadRoot is a directory whose whole tree a policy reads as one
// entry, verified against a manifest of SHA-256 sums.
type PinnedReadRoot struct {
	// Path is absolute and lexically normal, outside /proc, /dev and /sys.
	Path string `json:"path"`
	// Manifest is a file name ([A-Za-z0-9._-]+) in the manifest directory.
	Manifest string `json:"manifest"`
}

// Config is an exercise's prune.json. The zero value is an exercise with no
// prune.json: every key at its default.
type Config struct {
	// Key is the language key; "" means the family folder's name.
	Key string `json:"key,omitempty"`
	// Seed names a seed policy file; "" means none.
	Seed string `json:"seed,omitempty"`
	// KeptSeed names a kept seed: a policy file beside the seeds whose rows
	// every prune grants and no minimisation removes, each with a comment
	// saying why; "" means none.
	KeptSeed string `json:"kept_seed,omitempty"`
	// ReportGlobs, nil means DefaultReportGlobs.
	ReportGlobs []string `json:"report_globs,omitempty"`
	// HeapPinned: the exercise pins its heap, so the limits stage derives mem_mb.
	HeapPinned bool `json:"heap_pinned,omitempty"`
	// DeclaredHosts are "<dns name>:<port>[ tcp|udp]" the exercise may reach.
	DeclaredHosts []string `json:"declared_hosts,omitempty"`
	// PinnedReadRoots, see PinnedReadRoot.
	PinnedReadRoots []PinnedReadRoot `json:"pinned_read_roots,omitempty"`
	// RunsCompiledPrograms keeps [execute] beside write on the
	// compiled-programs directory.
	RunsCompiledPrograms bool `json:"runs_compiled_programs,omitempty"`
	// CompiledProgramsDirectory is relative to the working directory; ""
	// means DefaultCompiledProgramsDirectory. Only with RunsCompiledPrograms.
	CompiledProgramsDirectory string `json:"compiled_programs_directory,omitempty"`
	// UsesPseudoTerminals lets a policy grant /dev/pts read, write and ioctl.
	UsesPseudoTerminals bool `json:"uses_pseudo_terminals,omitempty"`
	// AddressSpaceUnbounded makes the written limits carry mem_mb=0.
	AddressSpaceUnbounded bool `json:"address_space_unbounded,omitempty"`
}

// ConfigError lists every problem of one prune.json, sorted.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return "prune.json: " + e.Problems[0]
	}
	return fmt.Sprintf("prune.json: %s (and %d more)", e.Problems[0], len(e.Problems)-1)
}

// errNotObject is the one problem discovery refuses a whole tree for besides
// a bad key; ParseConfig wraps it.
var errNotObject = errors.New("not a JSON object")

// topLevel decodes data as one JSON object, refusing duplicate keys and
// trailing data; it returns the members in document order.
func topLevel(data []byte) (keys []string, vals map[string]json.RawMessage, err error) {
	d := json.NewDecoder(bytes.NewReader(data))
	tok, err := d.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNotObject, err)
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return nil, nil, fmt.Errorf("%w: it starts with %s", errNotObject, describeToken(tok))
	}
	vals = map[string]json.RawMessage{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errNotObject, err)
		}
		k := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errNotObject, err)
		}
		if _, dup := vals[k]; dup {
			return nil, nil, fmt.Errorf("key %q appears twice", k)
		}
		keys = append(keys, k)
		vals[k] = v
	}
	if _, err := d.Token(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNotObject, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%w: data after the object", errNotObject)
	}
	return keys, vals, nil
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return string(t)
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// declaredKey reads only the "key" member, as discovery does: it returns ""
// when there is none, and an error for a non-object or a non-string key.
func declaredKey(data []byte) (string, error) {
	_, vals, err := topLevel(data)
	if err != nil {
		return "", err
	}
	raw, ok := vals["key"]
	if !ok {
		return "", nil
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", fmt.Errorf("key is %s, want a string", jsonKind(raw))
	}
	return k, nil
}

func jsonKind(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return "empty"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

var knownKeys = map[string]bool{
	"key": true, "seed": true, "kept_seed": true, "report_globs": true, "heap_pinned": true, "declared_hosts": true,
	"pinned_read_roots": true, "runs_compiled_programs": true, "compiled_programs_directory": true,
	"uses_pseudo_terminals": true, "address_space_unbounded": true,
}

// ParseConfig reads and checks a prune.json. The error is a *ConfigError
// naming every problem (unknown keys, wrong types, bad values); on error the
// returned Config is the zero value.
func ParseConfig(data []byte) (Config, error) {
	keys, vals, err := topLevel(data)
	if err != nil {
		return Config{}, &ConfigError{Problems: []string{err.Error()}}
	}
	r := &configReader{vals: vals}
	r.unknownKeys(keys)
	var c Config
	if r.str("key", &c.Key) && !ValidKey(c.Key) {
		r.bad("key %q is not a key: want lower-case letters and digits in dash-separated words (^[a-z0-9]+(-[a-z0-9]+)*$)", c.Key)
	}
	if r.str("seed", &c.Seed) && !seedPattern.MatchString(c.Seed) {
		r.bad("seed %q is not a seed file name: want [A-Za-z0-9][A-Za-z0-9._-]*.cfg", c.Seed)
	}
	if r.str("kept_seed", &c.KeptSeed) && !seedPattern.MatchString(c.KeptSeed) {
		r.bad("kept_seed %q is not a seed file name: want [A-Za-z0-9][A-Za-z0-9._-]*.cfg", c.KeptSeed)
	}
	if c.KeptSeed != "" && c.KeptSeed == c.Seed {
		r.bad("kept_seed and seed both name %q; a kept seed's rows are never minimised, a seed's are", c.Seed)
	}
	r.reportGlobs(&c)
	r.boolean("heap_pinned", &c.HeapPinned)
	r.declaredHosts(&c)
	if raw, ok := vals["pinned_read_roots"]; ok {
		if roots := r.pinnedReadRoots(raw); len(roots) > 0 {
			c.PinnedReadRoots = roots
		}
	}
	r.boolean("runs_compiled_programs", &c.RunsCompiledPrograms)
	r.compiledProgramsDirectory(&c)
	r.boolean("uses_pseudo_terminals", &c.UsesPseudoTerminals)
	r.boolean("address_space_unbounded", &c.AddressSpaceUnbounded)
	if len(r.problems) > 0 {
		sort.Strings(r.problems)
		return Config{}, &ConfigError{Problems: r.problems}
	}
	return c, nil
}

// configReader reads a prune.json's values by key, collecting every
// problem rather than stopping at the first.
type configReader struct {
	vals     map[string]json.RawMessage
	problems []string
}

func (r *configReader) bad(format string, a ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, a...))
}

// unknownKeys names every key that is not a prune.json key.
func (r *configReader) unknownKeys(keys []string) {
	var unknown []string
	for _, k := range keys {
		if !knownKeys[k] {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		r.bad("unknown keys %s; the keys are key, seed, kept_seed, report_globs, heap_pinned, declared_hosts, "+
			"pinned_read_roots, runs_compiled_programs, compiled_programs_directory, uses_pseudo_terminals, "+
			"address_space_unbounded", strings.Join(unknown, ", "))
	}
}

// str reads string k into dst and reports whether it was there and a string.
func (r *configReader) str(k string, dst *string) bool {
	raw, ok := r.vals[k]
	if !ok {
		return false
	}
	if err := json.Unmarshal(raw, dst); err != nil || jsonKind(raw) != "a string" {
		r.bad("%s is %s, want a string", k, jsonKind(raw))
		return false
	}
	return true
}

// boolean reads boolean k, if there, into dst.
func (r *configReader) boolean(k string, dst *bool) {
	raw, ok := r.vals[k]
	if !ok {
		return
	}
	if jsonKind(raw) != "a boolean" || json.Unmarshal(raw, dst) != nil {
		r.bad("%s is %s, want true or false", k, jsonKind(raw))
	}
}

// strs reads list of strings k and reports whether it was there and one.
func (r *configReader) strs(k string) ([]string, bool) {
	raw, ok := r.vals[k]
	if !ok {
		return nil, false
	}
	var out []string
	if jsonKind(raw) != "a list" || json.Unmarshal(raw, &out) != nil {
		r.bad("%s is %s, want a list of strings", k, jsonKindOrElements(raw))
		return nil, false
	}
	return out, true
}

func (r *configReader) reportGlobs(c *Config) {
	globs, ok := r.strs("report_globs")
	if !ok {
		return
	}
	if len(globs) == 0 {
		r.bad("report_globs is empty, want at least one glob (or no report_globs for the defaults)")
	}
	for _, g := range globs {
		if err := checkGlob(g); err != nil {
			r.bad("report_globs: %v", err)
		}
	}
	c.ReportGlobs = globs
}

func (r *configReader) declaredHosts(c *Config) {
	hosts, ok := r.strs("declared_hosts")
	if !ok {
		return
	}
	for _, h := range hosts {
		if _, err := ParseDeclaredHost(h); err != nil {
			r.bad("declared_hosts: %v", err)
		}
	}
	if len(hosts) > 0 {
		c.DeclaredHosts = hosts
	}
}

// compiledProgramsDirectory reads the directory, which must be relative
// and needs runs_compiled_programs (read before it).
func (r *configReader) compiledProgramsDirectory(c *Config) {
	if !r.str("compiled_programs_directory", &c.CompiledProgramsDirectory) {
		return
	}
	if err := checkRelativeDir(c.CompiledProgramsDirectory); err != nil {
		r.bad("compiled_programs_directory: %v", err)
	}
	if !c.RunsCompiledPrograms {
		r.bad("compiled_programs_directory %q is named but runs_compiled_programs is not true", c.CompiledProgramsDirectory)
	}
}

func jsonKindOrElements(raw json.RawMessage) string {
	if k := jsonKind(raw); k != "a list" {
		return k
	}
	return "a list with an element that is not a string"
}

// pinnedReadRoots reads pinned_read_roots: a list of {"path", "manifest"}
// objects whose paths do not overlap.
func (r *configReader) pinnedReadRoots(raw json.RawMessage) []PinnedReadRoot {
	var items []json.RawMessage
	if jsonKind(raw) != "a list" || json.Unmarshal(raw, &items) != nil {
		r.bad("pinned_read_roots is %s, want a list of {\"path\", \"manifest\"} objects", jsonKind(raw))
		return nil
	}
	var out []PinnedReadRoot
	for i, item := range items {
		root, ok := r.pinnedReadRoot(i, item)
		if !ok {
			continue
		}
		r.checkPinnedReadRoot(i, root)
		out = append(out, root)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			a, b := out[i].Path, out[j].Path
			if a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/") {
				r.bad("pinned_read_roots: %q and %q overlap", a, b)
			}
		}
	}
	return out
}

// pinnedReadRoot reads element i, an object of exactly two strings, path
// and manifest; false when it is not one.
func (r *configReader) pinnedReadRoot(i int, item json.RawMessage) (PinnedReadRoot, bool) {
	var root PinnedReadRoot
	keys, vals, err := topLevel(item)
	if err != nil {
		r.bad("pinned_read_roots[%d]: %v", i, err)
		return root, false
	}
	ok := true
	for _, k := range keys {
		if k != "path" && k != "manifest" {
			r.bad("pinned_read_roots[%d]: unknown key %q, want exactly path and manifest", i, k)
			ok = false
		}
	}
	for _, k := range []string{"path", "manifest"} {
		v, present := vals[k]
		if !present {
			r.bad("pinned_read_roots[%d]: no %s, want exactly path and manifest", i, k)
			ok = false
			continue
		}
		dst := &root.Path
		if k == "manifest" {
			dst = &root.Manifest
		}
		if jsonKind(v) != "a string" || json.Unmarshal(v, dst) != nil {
			r.bad("pinned_read_roots[%d]: %s is %s, want a string", i, k, jsonKind(v))
			ok = false
		}
	}
	return root, ok
}

// checkPinnedReadRoot checks element i's values: a directory on disk below
// /, and a manifest file name.
func (r *configReader) checkPinnedReadRoot(i int, root PinnedReadRoot) {
	if !path.IsAbs(root.Path) || path.Clean(root.Path) != root.Path || root.Path == "/" {
		r.bad("pinned_read_roots[%d]: path %q is not an absolute, normal path below /", i, root.Path)
	}
	for _, top := range []string{"/proc", "/dev", "/sys"} {
		if root.Path == top || strings.HasPrefix(root.Path, top+"/") {
			r.bad("pinned_read_roots[%d]: path %q is in %s, want a directory on disk", i, root.Path, top)
		}
	}
	if !manifestPattern.MatchString(root.Manifest) {
		r.bad("pinned_read_roots[%d]: manifest %q is not a file name ([A-Za-z0-9._-]+)", i, root.Manifest)
	}
}

// checkGlob refuses report globs that are empty, absolute, or climb out of
// the working directory, and patterns path.Match cannot read.
func checkGlob(g string) error {
	switch {
	case g == "":
		return errors.New("an empty glob")
	case strings.HasPrefix(g, "/"):
		return fmt.Errorf("glob %q is absolute, want one relative to the working directory", g)
	}
	for _, seg := range strings.Split(g, "/") {
		switch seg {
		case "", ".", "..":
			return fmt.Errorf("glob %q has an empty, \".\" or \"..\" part, want a plain relative path", g)
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("glob %q: %v", g, err)
		}
	}
	return nil
}

func checkRelativeDir(d string) error {
	if d == "" || strings.HasPrefix(d, "/") || path.Clean(d) != d || d == "." || d == ".." || strings.HasPrefix(d, "../") {
		return fmt.Errorf("%q is not a normal relative path inside the working directory", d)
	}
	return nil
}

// DeclaredHost is one parsed declared_hosts entry.
type DeclaredHost struct {
	Name      string
	Port      int
	Transport policy.Transport
}

// ParseDeclaredHost reads "<lower-case dns name>:<port>[ tcp|udp]".
func ParseDeclaredHost(s string) (DeclaredHost, error) {
	m := hostPattern.FindStringSubmatch(s)
	if m == nil || len(s) > 253+6+4 {
		return DeclaredHost{}, fmt.Errorf("%q is not <lower-case dns name>:<port>[ tcp|udp]", s)
	}
	name := s[:strings.LastIndexByte(s[:len(s)-len(m[6])], ':')]
	port, _ := strconv.Atoi(m[5])
	if port < 1 || port > 65535 || m[5][0] == '0' {
		return DeclaredHost{}, fmt.Errorf("%q has port %s, want 1 to 65535", s, m[5])
	}
	if len(name) > 253 {
		return DeclaredHost{}, fmt.Errorf("%q has a name longer than 253 bytes", s)
	}
	t := policy.TCP
	if m[7] == "udp" {
		t = policy.UDP
	}
	return DeclaredHost{Name: name, Port: port, Transport: t}, nil
}

// Rule is the [connect] seed rule the declared host becomes.
func (h DeclaredHost) Rule() policy.ConnectRule {
	return policy.ConnectRule{Host: h.Name, Port: h.Port, Transport: h.Transport,
		Comment: "declared host of the exercise (prune.json declared_hosts)"}
}
