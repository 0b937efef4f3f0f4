package recorder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/derive/limits"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// Files of a session directory (D/N/sessions/<k>/).
const (
	SessionFile    = "session.json"
	TraceFile      = "trace"
	TranscriptFile = "transcript.txt"
	// SessionsDir holds the sessions of a recording.
	SessionsDir = "sessions"
	// SessionSchema versions SessionRecord.
	SessionSchema = 1
)

// WorkDir is the working directory the policies name; an exercise is
// copied there before the session.
const WorkDir = "/var/tmp/testing-dir"

// ListedRoots are the directories whose every entry the starting state
// lists: the working directory, and /tmp, a fresh tmpfs in every guest.
// Elsewhere the guest's root is the recorded root itself (RootDigest).
var ListedRoots = []string{WorkDir, "/tmp"}

// Entry is one path of the starting state or of a session's view.
type Entry struct {
	Path string `json:"path"`
	// Dir: a directory.
	Dir bool `json:"dir,omitempty"`
}

// StartState is what existed before a session: the root's digest (as the
// host computed it) and every entry under ListedRoots, with the digest of
// that list.
type StartState struct {
	RootDigest string  `json:"root_digest"`
	ListDigest string  `json:"list_digest"`
	Entries    []Entry `json:"entries"`
}

// SessionRecord is session.json: one recorded session.
type SessionRecord struct {
	Schema   int      `json:"schema"`
	Command  []string `json:"command"`
	Exercise string   `json:"exercise,omitempty"`
	// Script is the script's text ("" for a session typed by hand).
	Script string `json:"script,omitempty"`
	// Interactive: the session was typed by hand through the user's
	// terminal (record run without --script); check cannot replay it.
	Interactive bool   `json:"interactive,omitempty"`
	WorkDir     string `json:"work_dir"`
	Status      int    `json:"status"`
	// ScriptError names the step that did not finish ("" the script ran
	// to its end); such a session is failed and never generates a policy.
	ScriptError   string     `json:"script_error,omitempty"`
	HungUp        bool       `json:"hung_up,omitempty"`
	Seconds       float64    `json:"seconds"`
	KernelRelease string     `json:"kernel_release"`
	Start         StartState `json:"start"`
	// Existed is, for every path the session's calls name and each of
	// their ancestors, whether it existed before the session (a directory
	// or not); a path missing here did not.
	Existed []Entry `json:"existed"`
	// Uses are the session's successful calls with what each needs.
	Uses []Use `json:"uses"`
	// TerminalIoctls counts the ioctls on the session's own terminal, left
	// out of Uses (dropTerminalIoctls says why).
	TerminalIoctls int `json:"terminal_ioctls"`
	// Limits is the session's process tree as sampled with run --sample
	// (nil: not sampled): the maxima generate --limits derives [limits]
	// from, the wall time the session's.
	Limits *limits.Measurement `json:"limits,omitempty"`
}

// Failed says why the session cannot stand for the program's use ("" it
// can).
func (s *SessionRecord) Failed() string {
	if s.ScriptError != "" {
		return "the script did not finish: " + s.ScriptError
	}
	return ""
}

// SessionDir is one session of a recording, read back.
type SessionDir struct {
	Dir    string
	Record *SessionRecord
}

// Sessions lists a recording's sessions in order.
func Sessions(rec string) ([]SessionDir, error) {
	ents, err := os.ReadDir(filepath.Join(rec, SessionsDir))
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", rec, err)
	}
	var out []SessionDir
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(rec, SessionsDir, e.Name())
		r, err := ReadSession(d)
		if err != nil {
			return nil, err
		}
		out = append(out, SessionDir{Dir: d, Record: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	if len(out) == 0 {
		return nil, fmt.Errorf("recording %s has no session: run `lockstep record run` first", rec)
	}
	return out, nil
}

// ReadSession reads a session directory's session.json.
func ReadSession(dir string) (*SessionRecord, error) {
	b, err := safefile.ReadFile(filepath.Join(dir, SessionFile), 0)
	if err != nil {
		return nil, err
	}
	var r SessionRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, SessionFile), err)
	}
	if r.Schema != SessionSchema {
		return nil, fmt.Errorf("read %s: schema %d, want %d", filepath.Join(dir, SessionFile), r.Schema, SessionSchema)
	}
	return &r, nil
}

// nextSessionDir is the directory the next session of rec goes to:
// sessions/001, 002, …
func nextSessionDir(rec string) (string, error) {
	base := filepath.Join(rec, SessionsDir)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	for k := 1; k < 10000; k++ {
		d := filepath.Join(base, fmt.Sprintf("%03d", k))
		if err := os.Mkdir(d, 0o755); err == nil {
			return d, nil
		} else if !os.IsExist(err) {
			return "", err
		}
	}
	return "", fmt.Errorf("recording %s: too many sessions", rec)
}

// existedMap indexes entries by path.
func existedMap(es []Entry) map[string]Entry {
	m := make(map[string]Entry, len(es))
	for _, e := range es {
		m[e.Path] = e
	}
	return m
}

// inListed reports whether p is a listed root or beneath one.
func inListed(p string) bool {
	for _, r := range ListedRoots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// marshal is indented JSON with < > & kept as written (strace's fd
// annotations are full of them).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// unmarshal decodes JSON into v.
func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
