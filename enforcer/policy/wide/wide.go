package wide

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// Code is a warning's stable identifier: never renumbered or reused.
type Code string

// The warning codes; Codes says what each means.
const (
	CodeSymlink     Code = "W001"
	CodeRoot        Code = "W002"
	CodeProcSys     Code = "W003"
	CodeHome        Code = "W004"
	CodeCredentials Code = "W005"
	CodeNesting     Code = "W006"
	CodeMagicLink   Code = "W007"
)

// CodeInfo is one row of the warning table.
type CodeInfo struct {
	Code Code
	Name string
	When string // when the warning is given
	// Refused marks a code whose row `lockstep run` refuses (exit 125):
	// `policy check` reports it as a problem, not a warning.
	Refused bool
}

// Refused reports whether `lockstep run` refuses a row with warning c.
func (c Code) Refused() bool {
	for _, i := range Codes {
		if i.Code == c {
			return i.Refused
		}
	}
	return false
}

// Codes is the warning table, in code order. docs/policy.md holds its
// rendering (Table), which a test keeps equal to it.
var Codes = []CodeInfo{
	{CodeSymlink, "symlink", "a row's last component is a symbolic link to a directory outside the row's own directory: Landlock grants the target and everything beneath it (a link to a file grants that one file and is not warned about)", false},
	{CodeRoot, "root", "a row is `/`, or resolves to it: the whole file system", false},
	{CodeProcSys, "proc-sys", "a row is `/proc` or `/sys` whole, or resolves to one: every process's `environ`, `cmdline` and descriptors this user may see; every kernel and device setting", false},
	{CodeHome, "home", "a row is `$HOME` (the invoking user's home) or a directory above it other than `/`: every credential kept there", false},
	{CodeCredentials, "credentials", "a row is, lies within or (below `$HOME` or the location's own directory) holds a credential location of `Credentials`: `~/.ssh`, `~/.aws`, `/etc/shadow`, `/root`…", false},
	{CodeNesting, "nesting", "a row's sections are a strict subset of an ancestor row's: Landlock grants the ancestor's wider rights there anyway", false},
	{CodeMagicLink, "magic-link", "a row is, or resolves through, a `/proc` magic link (`root`, `cwd`, `exe`, `fd/*`, `map_files/*`, `ns/*` of `/proc/self`, `/proc/thread-self`, `/proc/<pid>` or a task): it grants whatever that process's root, working directory or open file is (`/proc/self/root` is `/`). `lockstep run` refuses the row, so `policy check` counts it as a problem", true},
}

// Table renders Codes as the Markdown table of docs/policy.md.
func Table() string {
	var b strings.Builder
	b.WriteString("| code | name | warns when |\n| --- | --- | --- |\n")
	for _, c := range Codes {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Code, c.Name, c.When)
	}
	return b.String()
}

// Credential is a location that holds secrets.
type Credential struct {
	// Path is absolute, or relative to $HOME when it starts with "~/".
	Path string
	// Scope is the directory above which a row holding Path is not warned
	// about as a credential (it has its own warning or is too common):
	// "" means $HOME for a home location. /etc is granted by many bases,
	// and /etc/shadow is readable to root only, so a row of /etc is not a
	// warning; a row naming /etc/shadow, or /etc/ssh, is.
	Scope string
	What  string
}

// Credentials lists the credential locations W005 knows.
var Credentials = []Credential{
	{"~/.ssh", "", "SSH private keys"},
	{"~/.gnupg", "", "GnuPG private keys"},
	{"~/.aws", "", "AWS credentials"},
	{"~/.azure", "", "Azure credentials"},
	{"~/.config/gcloud", "", "Google Cloud credentials"},
	{"~/.config/gh", "", "the GitHub CLI's token"},
	{"~/.kube", "", "Kubernetes credentials"},
	{"~/.docker/config.json", "", "container registry credentials"},
	{"~/.netrc", "", "login passwords"},
	{"~/.git-credentials", "", "git passwords"},
	{"~/.pypirc", "", "package index tokens"},
	{"~/.npmrc", "", "package registry tokens"},
	{"~/.cargo/credentials.toml", "", "crate registry tokens"},
	{"/root", "/", "root's home"},
	{"/etc/shadow", "/etc", "password hashes"},
	{"/etc/gshadow", "/etc", "group password hashes"},
	{"/etc/sudoers", "/etc", "who may become root"},
	{"/etc/sudoers.d", "/etc", "who may become root"},
	{"/etc/ssh/ssh_host_rsa_key", "/etc", "an SSH host private key"},
	{"/etc/ssh/ssh_host_ecdsa_key", "/etc", "an SSH host private key"},
	{"/etc/ssh/ssh_host_ed25519_key", "/etc", "an SSH host private key"},
}

// Warning is one grant wider than it looks.
type Warning struct {
	Code Code
	// Path is the row; Target what it resolves to when that differs.
	Path, Target string
	Msg          string
}

// String is "W001 /row → /target: message" (without the arrow when the
// row resolves to itself).
func (w Warning) String() string {
	if w.Target != "" && w.Target != w.Path {
		return fmt.Sprintf("%s %s → %s: %s", w.Code, w.Path, w.Target, w.Msg)
	}
	return fmt.Sprintf("%s %s: %s", w.Code, w.Path, w.Msg)
}

// Options says whose machine the policy is judged on.
type Options struct {
	// Home is the invoking user's home ($HOME); "" leaves out W004 and the
	// home credential locations.
	Home string
}

// Check returns the warnings of p on this machine, sorted by row then code.
func Check(p *policy.Policy, o Options) []Warning {
	home := o.Home
	if home != "" {
		if r, err := Resolve(home); err == nil {
			home = r
		}
	}
	var ws []Warning
	for _, row := range rows(p) {
		ws = append(ws, checkRow(row, sectionsOf(p, row), home)...)
	}
	for _, n := range p.StrictSubsets() {
		ws = append(ws, Warning{Code: CodeNesting, Path: n.Path, Msg: n.String() + "; Landlock grants the wider rights there anyway (lockstep policy union --normalise raises it)"})
	}
	sort.SliceStable(ws, func(i, j int) bool {
		if ws[i].Path != ws[j].Path {
			return ws[i].Path < ws[j].Path
		}
		return ws[i].Code < ws[j].Code
	})
	return ws
}

func checkRow(row, secs, home string) []Warning {
	target, err := Resolve(row)
	var magic *MagicLinkError
	if errors.As(err, &magic) {
		return []Warning{{Code: CodeMagicLink, Path: row, Target: magic.Link, Msg: fmt.Sprintf("%s %s; lockstep run refuses it: grant the directory or file itself", secs, magic)}}
	}
	if err != nil {
		target = row
	}
	w := func(c Code, format string, a ...any) Warning {
		return Warning{Code: c, Path: row, Target: target, Msg: fmt.Sprintf(format, a...)}
	}
	var ws []Warning
	if m := symlinkEscape(row, target); m != "" {
		ws = append(ws, w(CodeSymlink, "%s names a symbolic link %s: Landlock grants it on %s and everything beneath it, not on the link", secs, m, target))
	}
	switch {
	case target == "/":
		return append(ws, w(CodeRoot, "%s on / is the whole file system: every home, every process's /proc entries, and to root /etc/shadow", secs))
	case target == "/proc":
		ws = append(ws, w(CodeProcSys, "%s on /proc whole exposes every process's environ, cmdline and open files this user may see; grant /proc/self (the command's own entries) or single files instead", secs))
	case target == "/sys":
		ws = append(ws, w(CodeProcSys, "%s on /sys whole exposes every kernel and device setting (writable ones to root); grant the files the command needs instead", secs))
	}
	if home != "" && home != "/" && policy.Within(home, target) {
		held := "any credential kept there"
		if h := heldCredentials(home); len(h) > 0 {
			held = "every credential kept there (" + strings.Join(h, ", ") + ")"
		}
		if target == home {
			return append(ws, w(CodeHome, "%s on $HOME (%s), the invoking user's home, grants %s", secs, home, held))
		}
		return append(ws, w(CodeHome, "%s on %s grants $HOME (%s), the invoking user's home, every home beside it and %s", secs, target, home, held))
	}
	// One warning per kind of secret: /etc/ssh holds three host keys.
	var kinds []string
	held := map[string][]string{}
	for _, c := range Credentials {
		loc, scope, ok := c.resolve(home)
		if !ok {
			continue
		}
		if policy.Within(target, loc) || policy.Within(loc, target) && target != scope && policy.Within(target, scope) && exists(loc) {
			if held[c.What] == nil {
				kinds = append(kinds, c.What)
			}
			held[c.What] = append(held[c.What], loc)
		}
	}
	for _, k := range kinds {
		ws = append(ws, w(CodeCredentials, "%s on %s covers %s: %s", secs, target, strings.Join(held[k], ", "), k))
	}
	return ws
}

// symlinkEscape describes how row's last component leads out of its own
// directory to the directory target, or returns "" when it does not.
func symlinkEscape(row, target string) string {
	fi, err := os.Lstat(row)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 || !isDir(target) || perProcess(target) {
		return ""
	}
	dir, err := Resolve(path.Dir(row))
	if err != nil || policy.Within(target, dir) {
		return ""
	}
	return fmt.Sprintf("out of %s to the directory %s", dir, target)
}

// resolve returns the location's absolute path and the scope below which
// a row holding it is warned about; ok is false for a home location when
// home is unknown.
func (c Credential) resolve(home string) (loc, scope string, ok bool) {
	rel, inHome := strings.CutPrefix(c.Path, "~/")
	if !inHome {
		return c.Path, c.Scope, true
	}
	if home == "" {
		return "", "", false
	}
	return path.Join(home, rel), home, true
}

// heldCredentials names the home credential locations that exist in home.
func heldCredentials(home string) []string {
	var held []string
	for _, c := range Credentials {
		if rel, ok := strings.CutPrefix(c.Path, "~/"); ok && exists(path.Join(home, rel)) {
			held = append(held, c.Path)
		}
	}
	return held
}

// Links describes each row of p that resolves to another path, as
// `lockstep -v run` prints them: "link /row → /target (a directory: the
// grant covers everything beneath it)".
func Links(p *policy.Policy) []string {
	var out []string
	for _, row := range rows(p) {
		target, err := Resolve(row)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("link %s: %v", row, err))
		case target == row:
		case isDir(target):
			out = append(out, fmt.Sprintf("link %s → %s (a directory: %s grants everything beneath it)", row, target, sectionsOf(p, row)))
		default:
			out = append(out, fmt.Sprintf("link %s → %s (%s grants that file)", row, target, sectionsOf(p, row)))
		}
	}
	return out
}

func rows(p *policy.Policy) []string {
	var out []string
	for row, secs := range p.FS {
		for _, ok := range secs {
			if ok {
				out = append(out, row)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// sectionsOf spells the sections naming row as "[read][execute]".
func sectionsOf(p *policy.Policy, row string) string {
	var b strings.Builder
	for _, s := range policy.FilesystemSections {
		if p.FS[row][s] {
			b.WriteString("[" + string(s) + "]")
		}
	}
	return b.String()
}

func isDir(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}
