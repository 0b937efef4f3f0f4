package images

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
)

// BuilderVersion changes whenever the build steps change in a way that can
// change the root they produce; it is part of every recipe key.
const BuilderVersion = "images/1"

//go:embed */packages.txt
var recipeFS embed.FS

// Package is one pinned Debian package.
type Package struct {
	Name    string
	Version string
}

// String renders the package as apt spells a pinned install: name=version.
func (p Package) String() string { return p.Name + "=" + p.Version }

// Recipe is a parsed images/<name>/packages.txt.
type Recipe struct {
	// Name is the recipe's folder name, e.g. "generic".
	Name string
	// Suite is the Debian suite to bootstrap, e.g. "bookworm".
	Suite string
	// Packages are sorted by name, each name once.
	Packages []Package
}

// LineError is one problem of a recipe, at a line.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ErrorList holds every problem found in a recipe, sorted by line.
type ErrorList []*LineError

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

var (
	// Debian policy 5.6.1 (package names) and 5.6.12 (versions).
	nameRE    = lazyre.New(`^[a-z0-9][a-z0-9+.-]+$`)
	versionRE = lazyre.New(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
	suiteRE   = lazyre.New(`^[a-z][a-z0-9-]*$`)
	recipeRE  = lazyre.New(`^[a-z][a-z0-9-]*$`)
)

// ParseRecipe parses a recipe's text; file names it in errors. Every
// problem is reported at once as an ErrorList.
func ParseRecipe(name, file string, src []byte) (*Recipe, error) {
	r := &Recipe{Name: name}
	var errs ErrorList
	bad := func(line int, format string, a ...any) {
		errs = append(errs, &LineError{File: file, Line: line, Msg: fmt.Sprintf(format, a...)})
	}
	if !recipeRE.MatchString(name) {
		bad(0, "recipe name %q is not lower-case letters, digits and dashes", name)
	}
	seen := map[string]int{}
	suiteLine := 0
	for i, line := range strings.Split(string(src), "\n") {
		n := i + 1
		if strings.ContainsRune(line, '\r') {
			bad(n, "carriage return in line; the file must use LF line ends")
			continue
		}
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "suite "); ok {
			rest = strings.TrimSpace(rest)
			switch {
			case suiteLine != 0:
				bad(n, "second suite statement; the first is on line %d", suiteLine)
			case !suiteRE.MatchString(rest):
				bad(n, "suite %q is not a Debian suite name", rest)
			default:
				r.Suite, suiteLine = rest, n
			}
			continue
		}
		pkg, ver, ok := strings.Cut(line, "=")
		if !ok {
			bad(n, "%q is neither `suite <name>` nor `<package>=<version>`", line)
			continue
		}
		if !nameRE.MatchString(pkg) {
			bad(n, "package name %q is not a Debian package name", pkg)
			continue
		}
		if !versionRE.MatchString(ver) {
			bad(n, "version %q of %s is not a Debian version", ver, pkg)
			continue
		}
		if prev, dup := seen[pkg]; dup {
			bad(n, "package %s listed twice (also on line %d)", pkg, prev)
			continue
		}
		seen[pkg] = n
		r.Packages = append(r.Packages, Package{Name: pkg, Version: ver})
	}
	if suiteLine == 0 {
		bad(1, "no `suite <name>` statement")
	}
	if len(r.Packages) == 0 {
		bad(1, "no packages listed")
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	sort.Slice(r.Packages, func(i, j int) bool { return r.Packages[i].Name < r.Packages[j].Name })
	return r, nil
}

// Render writes the recipe canonically: the suite, then one package per
// line sorted by name. Comments are not kept.
func (r *Recipe) Render() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "suite %s\n", r.Suite)
	for _, p := range r.Packages {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// Key is the recipe's content key: hex SHA-256 over the builder version, the
// name and the canonical rendering. An image directory is <name>-<Key()[:16]>.
func (r *Recipe) Key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", BuilderVersion, r.Name)
	h.Write(r.Render())
	return hex.EncodeToString(h.Sum(nil))
}

// DirName is the name of the recipe's image directory in the cache.
func (r *Recipe) DirName() string { return r.Name + "-" + r.Key()[:16] }

// ErrNoRecipe is returned by LoadRecipe for a name without a packages.txt.
var ErrNoRecipe = errors.New("no such image recipe")

// Names lists the recipes built into this binary, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(recipeFS, ".")
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := fs.Stat(recipeFS, e.Name()+"/packages.txt"); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	return names
}

// LoadRecipe parses the embedded images/<name>/packages.txt.
func LoadRecipe(name string) (*Recipe, error) {
	if !recipeRE.MatchString(name) {
		return nil, fmt.Errorf("image name %q: %w (recipes: %s)", name, ErrNoRecipe, strings.Join(Names(), ", "))
	}
	src, err := recipeFS.ReadFile(name + "/packages.txt")
	if err != nil {
		return nil, fmt.Errorf("image %q: %w (recipes: %s)", name, ErrNoRecipe, strings.Join(Names(), ", "))
	}
	return ParseRecipe(name, "images/"+name+"/packages.txt", src)
}
