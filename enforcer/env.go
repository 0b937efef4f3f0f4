package enforcer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// SafeEnv names the caller's variables a command gets when nothing else is
// asked (Options.Env nil, `lockstep run` without --env): what programs need
// to find commands, a home, a user name, a locale, a terminal type, a time
// zone and a temporary directory, and nothing that commonly holds a secret
// (tokens, keys, SSH_AUTH_SOCK) or changes how a program loads (LD_*,
// PYTHONPATH, NODE_OPTIONS, …). Every LC_* variable passes too (SafeEnvName).
var SafeEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "TMPDIR"}

// SafeEnvName reports whether the caller's variable name passes by default.
func SafeEnvName(name string) bool {
	if strings.HasPrefix(name, "LC_") {
		return true
	}
	for _, s := range SafeEnv {
		if name == s {
			return true
		}
	}
	return false
}

// EnvRule is one variable passed on purpose: with Set, Name=Value is set;
// without, the caller's value of Name passes (nothing when it has none).
type EnvRule struct {
	Name  string
	Value string
	Set   bool
}

// String is the rule as --env takes it.
func (r EnvRule) String() string {
	if r.Set {
		return r.Name + "=" + r.Value
	}
	return r.Name
}

// maxEnvFile bounds an --env-file: an environment larger than this is not
// one a person wrote.
const maxEnvFile = 1 << 20

// ParseEnvRule parses one --env argument: NAME (pass the caller's value) or
// NAME=VALUE (set it; the value is taken as is, "=" and spaces included).
// NAME is a letter or underscore, then letters, digits and underscores; the
// value holds no NUL byte (execve(2) could not carry it).
func ParseEnvRule(s string) (EnvRule, error) {
	name, value, set := strings.Cut(s, "=")
	if !validEnvName(name) {
		return EnvRule{}, fmt.Errorf("%q: want NAME or NAME=VALUE, NAME made of letters, digits and _, not starting with a digit", s)
	}
	if strings.IndexByte(value, 0) >= 0 {
		return EnvRule{}, fmt.Errorf("%s: the value holds a NUL byte, which no environment variable can carry", name)
	}
	return EnvRule{Name: name, Value: value, Set: set}, nil
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseEnvFile parses an --env-file: one rule per line as --env takes it
// (NAME or NAME=VALUE, the value to the end of the line, no quoting), blank
// lines and lines starting with # ignored. Every bad line is reported, with
// its number, in one error.
func ParseEnvFile(name string, data []byte) ([]EnvRule, error) {
	var rules []EnvRule
	var errs []error
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if line[len(line)-1] == '\r' {
			errs = append(errs, fmt.Errorf("%s:%d: the line ends with a carriage return; want LF line ends", name, i+1))
			continue
		}
		r, err := ParseEnvRule(string(line))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, i+1, err))
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}

// ReadEnvFile reads and parses an --env-file. It refuses anything but a
// regular file (a FIFO or a device would block or never end) and a file over
// 1 MiB.
func ReadEnvFile(path string) ([]EnvRule, error) {
	data, err := safefile.ReadFile(path, maxEnvFile)
	switch {
	case errors.Is(err, safefile.ErrNotRegular):
		return nil, fmt.Errorf("env file %s: not a regular file; want a file of NAME=VALUE lines: %w", path, err)
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, fmt.Errorf("env file %s: larger than %d bytes", path, maxEnvFile)
	case err != nil:
		return nil, fmt.Errorf("env file: %w", err)
	}
	return ParseEnvFile(path, data)
}

// CommandEnv builds a command's environment from the caller's: the
// variables SafeEnvName lets pass, then each rule in order (a later rule for
// the same name wins). RoleEnv never passes.
func CommandEnv(caller []string, rules []EnvRule) []string {
	env := make([]string, 0, len(SafeEnv)+len(rules))
	at := map[string]int{}
	put := func(name, kv string) {
		if i, ok := at[name]; ok {
			env[i] = kv
			return
		}
		at[name] = len(env)
		env = append(env, kv)
	}
	value := map[string]string{}
	for _, kv := range caller {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == RoleEnv {
			continue
		}
		value[name] = kv
		if SafeEnvName(name) {
			put(name, kv)
		}
	}
	for _, r := range rules {
		switch {
		case r.Name == RoleEnv:
		case r.Set:
			put(r.Name, r.Name+"="+r.Value)
		case value[r.Name] != "":
			put(r.Name, value[r.Name])
		}
	}
	return env
}

// DroppedEnv names the caller's variables CommandEnv left out of env, in the
// caller's order: what `lockstep -v run` reports.
func DroppedEnv(caller, env []string) []string {
	kept := map[string]bool{}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		kept[name] = true
	}
	var dropped []string
	for _, kv := range caller {
		name, _, _ := strings.Cut(kv, "=")
		if !kept[name] && name != RoleEnv {
			dropped = append(dropped, name)
		}
	}
	return dropped
}

// ParseEnvRules parses the values of lockstep run's --env flags.
func ParseEnvRules(flags []string) ([]EnvRule, error) {
	var rules []EnvRule
	for _, f := range flags {
		r, err := ParseEnvRule(f)
		if err != nil {
			return nil, fmt.Errorf("--env %w", err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ReadEnvFiles reads the --env-file files, in order. The command's
// environment is the caller's safe variables, then these rules, then the
// --env flags (a later rule for a name wins).
func ReadEnvFiles(files []string) ([]EnvRule, error) {
	var rules []EnvRule
	for _, f := range files {
		rs, err := ReadEnvFile(f)
		if err != nil {
			return nil, err
		}
		rules = append(rules, rs...)
	}
	return rules, nil
}

// EnvNames are the names of an environment's NAME=VALUE entries.
func EnvNames(env []string) []string {
	names := make([]string, len(env))
	for i, kv := range env {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	return names
}
