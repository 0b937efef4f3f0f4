// Package lockstep, the module root, holds only the module's architecture
// tests: docs/architecture.md's import graph is the one go list reports,
// every package says in doc.go what it is for, and nothing cites a file
// outside the repository. They read the source tree only, so they run
// anywhere the go command does.
package lockstep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/lockstep-sandbox/lockstep"
	archDoc = "docs/architecture.md"
)

// goosList are the systems whose build tags go list applies: linux is what
// lockstep runs on, the others pick up the files behind !linux tags.
var goosList = []string{"linux", "darwin", "windows"}

// pkgInfo is one package of the module, its imports of other packages of the
// module merged over goosList.
type pkgInfo struct {
	name        string
	dir         string
	imports     map[string]bool
	testImports map[string]bool
}

// listModule runs go list for every GOOS of goosList and merges what it
// reports. Packages with no non-test file (the module root holds only this
// test) are left out.
func listModule(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	pkgs := map[string]*pkgInfo{}
	for _, goos := range goosList {
		if err := listFor(goos, pkgs); err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

type goListPkg struct {
	ImportPath, Name, Dir              string
	GoFiles                            []string
	Imports, TestImports, XTestImports []string
}

func listFor(goos string, pkgs map[string]*pkgInfo) error {
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Name,Dir,GoFiles,Imports,TestImports,XTestImports", "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("GOOS=%s go list ./...: %w: %s", goos, err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goListPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("GOOS=%s go list: decode: %w", goos, err)
		}
		if len(p.GoFiles) == 0 {
			continue
		}
		path, ok := local(p.ImportPath)
		if !ok {
			continue
		}
		info := pkgs[path]
		if info == nil {
			info = &pkgInfo{name: p.Name, dir: p.Dir, imports: map[string]bool{}, testImports: map[string]bool{}}
			pkgs[path] = info
		}
		addLocal(info.imports, p.Imports, path)
		addLocal(info.testImports, p.TestImports, path)
		addLocal(info.testImports, p.XTestImports, path)
	}
}

// local returns an import path of the module relative to the module root.
func local(importPath string) (string, bool) {
	return strings.CutPrefix(importPath, module+"/")
}

func addLocal(set map[string]bool, imports []string, self string) {
	for _, imp := range imports {
		if p, ok := local(imp); ok && p != self {
			set[p] = true
		}
	}
}

// arrowLine is one line of a block of docs/architecture.md: a package (or a
// pattern), an arrow, and the packages (or patterns) it points to.
type arrowLine struct {
	n    int // line number in the file
	from string
	to   []string
}

func (l arrowLine) String() string { return render(l.from, "→", l.to) }

func render(from, arrow string, to []string) string {
	if len(to) == 0 {
		return from + " " + arrow
	}
	return from + " " + arrow + " " + strings.Join(to, ", ")
}

// docBlock reads the lines between <!-- name --> and <!-- /name --> of
// docs/architecture.md, each split at arrow. Fences and blank lines are
// skipped.
func docBlock(t *testing.T, name, arrow string) []arrowLine {
	t.Helper()
	b, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, "<!-- "+name+" -->")
	end := slices.Index(lines, "<!-- /"+name+" -->")
	if start < 0 || end < start {
		t.Fatalf("%s: no block between <!-- %s --> and <!-- /%s -->", archDoc, name, name)
	}
	var out []arrowLine
	for i := start + 1; i < end; i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "```") {
			continue
		}
		from, rest, ok := strings.Cut(line, arrow)
		if !ok {
			t.Fatalf("%s:%d: %q has no %s", archDoc, i+1, line, arrow)
		}
		l := arrowLine{n: i + 1, from: strings.TrimSpace(from)}
		for _, to := range strings.Split(rest, ",") {
			if to = strings.TrimSpace(to); to != "" {
				l.to = append(l.to, to)
			}
		}
		out = append(out, l)
	}
	return out
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestImportGraph holds docs/architecture.md's import graph to go list: the
// same packages, the same arrows, every arrow pointing down, test files
// importing only what the page allows them, and no arrow a rule forbids.
func TestImportGraph(t *testing.T) {
	pkgs := listModule(t)
	graph := docBlock(t, "import-graph", "→")
	var problems []string
	problems = append(problems, graphProblems(pkgs, graph)...)
	problems = append(problems, orderProblems(graph)...)
	problems = append(problems, testImportProblems(pkgs, docBlock(t, "test-imports", "→"))...)
	problems = append(problems, forbiddenProblems(pkgs, docBlock(t, "forbidden", "↛"))...)
	if len(problems) > 0 {
		t.Errorf("%s does not match the imports go list reports (one line per package; see its \"Import graph\"):\n%s",
			archDoc, strings.Join(problems, "\n"))
	}
}

// graphProblems compares the import-graph block with go list, line by line.
func graphProblems(pkgs map[string]*pkgInfo, graph []arrowLine) []string {
	var problems []string
	byPkg := map[string]arrowLine{}
	for _, l := range graph {
		if prev, dup := byPkg[l.from]; dup {
			problems = append(problems, fmt.Sprintf("%s:%d: %s has a line already (line %d): merge them", archDoc, l.n, l.from, prev.n))
			continue
		}
		byPkg[l.from] = l
		if pkgs[l.from] == nil {
			problems = append(problems, fmt.Sprintf("%s:%d: remove the line %q: go list has no package %s", archDoc, l.n, l.String(), l.from))
		}
	}
	for _, path := range sortedKeys(keysOf(pkgs)) {
		want := render(path, "→", sortedKeys(pkgs[path].imports))
		l, ok := byPkg[path]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: add the line\n\t%s\n  to the import-graph block, %s", archDoc, want, placeNew(pkgs, graph, path)))
		case l.String() != want:
			problems = append(problems, fmt.Sprintf("%s:%d: %s; replace the line\n\t%s\n  with\n\t%s", archDoc, l.n, arrowDiff(l, pkgs[path].imports), l.String(), want))
		}
	}
	return problems
}

// placeNew says where a new package's line goes: below the last line of a
// package that imports it.
func placeNew(pkgs map[string]*pkgInfo, graph []arrowLine, path string) string {
	last := -1
	for i, l := range graph {
		if p := pkgs[l.from]; p != nil && p.imports[path] {
			last = i
		}
	}
	if last < 0 {
		return "above the lines of the packages it imports (nothing listed imports it)"
	}
	return fmt.Sprintf("below line %d (%s, the last listed package that imports it)", graph[last].n, graph[last].from)
}

func keysOf(pkgs map[string]*pkgInfo) map[string]bool {
	set := map[string]bool{}
	for k := range pkgs {
		set[k] = true
	}
	return set
}

// arrowDiff names the arrows a line lacks and the ones it lists in vain.
func arrowDiff(l arrowLine, imports map[string]bool) string {
	listed := map[string]bool{}
	var parts []string
	for _, to := range l.to {
		listed[to] = true
		if !imports[to] {
			parts = append(parts, fmt.Sprintf("%s no longer imports %s", l.from, to))
		}
	}
	for _, imp := range sortedKeys(imports) {
		if !listed[imp] {
			parts = append(parts, fmt.Sprintf("%s imports %s, which the page does not list", l.from, imp))
		}
	}
	if len(parts) == 0 {
		return "the same arrows, sorted and spelt as go list has them"
	}
	return strings.Join(parts, "; ")
}

// orderProblems checks that every arrow of the block points to a line below:
// one problem per package whose line sits above one of its importers.
func orderProblems(graph []arrowLine) []string {
	lastImporter := map[string]int{}
	for i, l := range graph {
		for _, to := range l.to {
			lastImporter[to] = i
		}
	}
	var problems []string
	for j, l := range graph {
		if i, ok := lastImporter[l.from]; ok && i >= j {
			problems = append(problems, fmt.Sprintf("%s:%d: arrows point down only, but %s (line %d) imports %s: move the line of %s below line %d",
				archDoc, l.n, graph[i].from, graph[i].n, l.from, l.from, graph[i].n))
		}
	}
	return problems
}

// testImportProblems checks the imports of test files: what the package
// reaches through the graph, the test helpers, or an arrow the test-imports
// block lists. Test helpers are for tests only.
func testImportProblems(pkgs map[string]*pkgInfo, block []arrowLine) []string {
	helpers := map[string]bool{}
	extra := map[string]arrowLine{}
	var problems []string
	for _, l := range block {
		if l.from == "*" {
			for _, h := range l.to {
				helpers[h] = true
			}
			continue
		}
		extra[l.from] = l
	}
	for _, path := range sortedKeys(keysOf(pkgs)) {
		p := pkgs[path]
		for _, imp := range sortedKeys(p.imports) {
			if helpers[imp] {
				problems = append(problems, fmt.Sprintf("%s imports the test helper %s in a non-test file: only tests may (the test-imports block's * line)", path, imp))
			}
		}
		reach := reachable(pkgs, path)
		l, listed := extra[path]
		allowed := map[string]bool{}
		for _, to := range l.to {
			allowed[to] = true
		}
		var missing []string
		for _, imp := range sortedKeys(p.testImports) {
			if !reach[imp] && !helpers[imp] && !allowed[imp] {
				missing = append(missing, imp)
			}
		}
		for _, to := range l.to {
			switch {
			case reach[to]:
				problems = append(problems, fmt.Sprintf("%s:%d: %s → %s is an arrow of the graph already: drop it from this line", archDoc, l.n, path, to))
			case !p.testImports[to]:
				problems = append(problems, fmt.Sprintf("%s:%d: no test of %s imports %s: drop it from this line", archDoc, l.n, path, to))
			}
		}
		if len(missing) == 0 {
			continue
		}
		if listed {
			problems = append(problems, fmt.Sprintf("%s:%d: tests of %s import %s; replace the line\n\t%s\n  with\n\t%s",
				archDoc, l.n, path, strings.Join(missing, ", "), l.String(), render(path, "→", sortedUnion(l.to, missing))))
		} else {
			problems = append(problems, fmt.Sprintf("%s: tests of %s import %s, which %s does not reach; add the line\n\t%s\n  to the test-imports block",
				archDoc, path, strings.Join(missing, ", "), path, render(path, "→", missing)))
		}
	}
	for _, l := range block {
		if l.from != "*" && pkgs[l.from] == nil {
			problems = append(problems, fmt.Sprintf("%s:%d: remove the line %q: go list has no package %s", archDoc, l.n, l.String(), l.from))
		}
	}
	return problems
}

func sortedUnion(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range append(slices.Clone(a), b...) {
		set[s] = true
	}
	return sortedKeys(set)
}

// reachable is every package path reaches through non-test imports.
func reachable(pkgs map[string]*pkgInfo, path string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		info := pkgs[p]
		if info == nil {
			return
		}
		for imp := range info.imports {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(path)
	return seen
}

// matches reports whether path is pattern, or lies below it for "a/...".
func matches(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// forbiddenProblems checks every arrow, of non-test and test files, against
// the forbidden block.
func forbiddenProblems(pkgs map[string]*pkgInfo, rules []arrowLine) []string {
	var problems []string
	for _, path := range sortedKeys(keysOf(pkgs)) {
		p := pkgs[path]
		for _, kind := range []struct {
			who     string
			imports map[string]bool
		}{{path + " imports", p.imports}, {"tests of " + path + " import", p.testImports}} {
			for _, imp := range sortedKeys(kind.imports) {
				for _, r := range rules {
					if !matches(r.from, path) {
						continue
					}
					for _, to := range r.to {
						if matches(to, imp) {
							problems = append(problems, fmt.Sprintf("%s:%d: %s %s, which the rule %q forbids", archDoc, r.n, kind.who, imp, render(r.from, "↛", r.to)))
						}
					}
				}
			}
		}
	}
	return problems
}

// TestPackageDocs: every package of the module says what it is for in its
// doc.go, and only there, and pruner/doc.go lists every pruner package.
func TestPackageDocs(t *testing.T) {
	pkgs := listModule(t)
	for _, path := range sortedKeys(keysOf(pkgs)) {
		p := pkgs[path]
		want := "Package " + p.name + " "
		if p.name == "main" {
			want = "Command " + filepath.Base(path) + " "
		}
		doc, err := packageComment(filepath.Join(p.dir, "doc.go"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			t.Errorf("%s has no doc.go: add one whose comment begins %q and says what the package is for", path, want)
		case err != nil:
			t.Error(err)
		case !strings.HasPrefix(doc, want):
			t.Errorf("%s/doc.go: its package comment begins %q, want %q and what the package is for", path, firstLine(doc), want)
		}
		others, err := otherPackageComments(p.dir)
		if err != nil {
			t.Error(err)
		}
		for _, f := range others {
			t.Errorf("%s/%s has a package comment too: the package's comment lives in doc.go alone; move it there", path, f)
		}
	}
	prunerDoc, err := os.ReadFile("pruner/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range sortedKeys(keysOf(pkgs)) {
		if strings.HasPrefix(path, "pruner/") && !bytes.Contains(prunerDoc, []byte("["+module+"/"+path+"]")) {
			t.Errorf("pruner/doc.go does not list %s: add a line [%s/%s] saying what it is for", path, module, path)
		}
	}
}

// packageComment returns the package comment of one file, "" when it has
// none.
func packageComment(file string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	if f.Doc == nil {
		return "", nil
	}
	return f.Doc.Text(), nil
}

// otherPackageComments lists the non-test Go files of dir, doc.go aside,
// that carry a package comment.
func otherPackageComments(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "doc.go" || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		doc, err := packageComment(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if doc != "" {
			out = append(out, name)
		}
	}
	return out, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// outsideCitations are names of files that live outside the repository
// (the project's shared notes), spelt in halves so this file does not cite
// them itself.
var outsideCitations = []string{
	"DESIGN" + ".md",
	"interfaces" + ".md",
	"seed" + "-0",
	"shared" + "/reference",
	".." + "/shared",
}

// TestNoOutsideCitations: the repository stands alone; no Go file, doc,
// script, workflow or Makefile names a file outside it.
func TestNoOutsideCitations(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".yml", ".yaml":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, c := range outsideCitations {
				if strings.Contains(line, c) {
					t.Errorf("%s:%d cites %s, a file outside the repository: state the fact, or point at docs/design.md", path, i+1, c)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
