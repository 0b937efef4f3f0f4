package workflows

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"mvdan.cc/sh/v3/syntax"
)

// repoRoot is the repository root, one level above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// verbInfo is what the checker knows of one registered lockstep verb.
type verbInfo struct {
	// subs are the subcommands the Usage line lists ({a|b|c}); nil when the
	// verb takes none.
	subs map[string]bool
	// flags defined by the verb's Flags function; nil when they could not
	// all be found by reading the source (the check is then skipped).
	flags map[string]bool
	file  string
}

// repoInfo is what a run step may call.
type repoInfo struct {
	root    string
	verbs   map[string]*verbInfo
	targets map[string]bool
}

func loadRepo(t testing.TB) *repoInfo {
	t.Helper()
	root := repoRoot(t)
	verbs, err := parseVerbs(filepath.Join(root, "cmd", "lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	return &repoInfo{root: root, verbs: verbs, targets: makeTargets(mk)}
}

var targetRE = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.-]*(?:[ \t]+[A-Za-z0-9_][A-Za-z0-9_.-]*)*)[ \t]*:([^=]|$)`)

// makeTargets lists the explicit rule targets of a Makefile.
func makeTargets(src []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		m := targetRE.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], ".") {
			continue
		}
		for _, t := range strings.Fields(m[1]) {
			out[t] = true
		}
	}
	return out
}

// packageConst is the string constant sel names (pkg.Name), read from the
// non-test files of the module's package directory of that name; "" when
// there is none.
func packageConst(root string, sel *ast.SelectorExpr) string {
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	files, _ := filepath.Glob(filepath.Join(root, pkg.Name, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			continue
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name == sel.Sel.Name && i < len(vs.Values) {
						if v, ok := stringLit(vs.Values[i]); ok {
							return v
						}
					}
				}
			}
		}
	}
	return ""
}

// isVerbType reports whether a composite literal's type is the CLI's verb
// type, cli.Verb (internal/cli), the only way cmd/lockstep registers one.
func isVerbType(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Verb" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "cli"
}

// parseVerbs reads the non-test Go files of cmd/lockstep and returns every
// verb registered with a composite literal cli.Verb{Name: "…", …}.
func parseVerbs(dir string) (map[string]*verbInfo, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	funcs := map[string]*ast.FuncDecl{}
	var parsed []*ast.File
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", f, err)
		}
		parsed = append(parsed, af)
		names = append(names, filepath.Base(f))
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	verbs := map[string]*verbInfo{}
	for i, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if !isVerbType(cl.Type) {
				return true
			}
			vi := &verbInfo{file: names[i]}
			name := ""
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil {
					continue
				}
				switch key.Name {
				case "Name":
					name, _ = stringLit(kv.Value)
					if sel, ok := kv.Value.(*ast.SelectorExpr); ok {
						// A package's constant (Name: enforcer.Verb).
						name = packageConst(filepath.Join(dir, "..", ".."), sel)
					}
				case "Usage":
					if u, ok := stringLit(kv.Value); ok {
						vi.subs = usageSubs(u)
					}
				case "Flags":
					// A function literal, or the name of a package function.
					var ft *ast.FuncType
					var body *ast.BlockStmt
					switch fv := kv.Value.(type) {
					case *ast.FuncLit:
						ft, body = fv.Type, fv.Body
					case *ast.Ident:
						if fd := funcs[fv.Name]; fd != nil {
							ft, body = fd.Type, fd.Body
						}
					}
					if ft != nil && body != nil && len(ft.Params.List) > 0 && len(ft.Params.List[0].Names) > 0 {
						vi.flags = map[string]bool{}
						if !collectFlags(body, ft.Params.List[0].Names[0].Name, funcs, vi.flags, 0) {
							vi.flags = nil
						}
					}
				}
			}
			if name != "" {
				verbs[name] = vi
			}
			return true
		})
	}
	return verbs, nil
}

func stringLit(e ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			s, err := strconv.Unquote(v.Value)
			return s, err == nil
		}
	case *ast.BinaryExpr:
		if v.Op == token.ADD {
			a, ok1 := stringLit(v.X)
			b, ok2 := stringLit(v.Y)
			return a + b, ok1 && ok2
		}
	}
	return "", false
}

var subsRE = regexp.MustCompile(`^\{?([a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)+)\}?$`)

// usageSubs reads the subcommands from a Usage line such as
// "kernel {build|verify|list|path} [--pin <p>]".
func usageSubs(usage string) map[string]bool {
	f := strings.Fields(usage)
	if len(f) < 2 {
		return nil
	}
	m := subsRE.FindStringSubmatch(f[1])
	if m == nil {
		return nil
	}
	out := map[string]bool{}
	for _, s := range strings.Split(m[1], "|") {
		out[s] = true
	}
	return out
}

// flagMethods maps a flag.FlagSet method to the index of its name argument.
var flagMethods = map[string]int{
	"String": 0, "Bool": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "Float64": 0, "Duration": 0,
	"Func": 0, "BoolFunc": 0,
	"StringVar": 1, "BoolVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1,
	"Float64Var": 1, "DurationVar": 1, "Var": 1, "TextVar": 1,
}

// collectFlags adds the names of flags defined on fsName within body, and
// follows calls that pass fsName to another function of the package. It
// returns false when a definition's name is not a string literal or fsName
// escapes into something it cannot follow.
func collectFlags(body *ast.BlockStmt, fsName string, funcs map[string]*ast.FuncDecl, out map[string]bool, depth int) bool {
	if depth > 4 {
		return false
	}
	complete := true
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == fsName {
				idx, known := flagMethods[sel.Sel.Name]
				if !known {
					return true // Parse, Args, SetOutput, …
				}
				if idx >= len(call.Args) {
					complete = false
					return true
				}
				if s, ok := stringLit(call.Args[idx]); ok {
					out[s] = true
				} else {
					complete = false
				}
				return true
			}
		}
		for i, a := range call.Args {
			id, ok := a.(*ast.Ident)
			if !ok || id.Name != fsName {
				continue
			}
			var fd *ast.FuncDecl
			if fn, ok := call.Fun.(*ast.Ident); ok {
				fd = funcs[fn.Name]
			}
			if fd == nil || fd.Body == nil {
				complete = false
				continue
			}
			pname := paramName(fd, i)
			if pname == "" || !collectFlags(fd.Body, pname, funcs, out, depth+1) {
				complete = false
			}
		}
		return true
	})
	return complete
}

func paramName(fd *ast.FuncDecl, idx int) string {
	i := 0
	for _, f := range fd.Type.Params.List {
		for _, n := range f.Names {
			if i == idx {
				return n.Name
			}
			i++
		}
	}
	return ""
}

// Workflow and action files, as much of them as the checks read.
type step struct {
	Name  string            `yaml:"name"`
	ID    string            `yaml:"id"`
	Uses  string            `yaml:"uses"`
	Run   string            `yaml:"run"`
	Shell string            `yaml:"shell"`
	With  map[string]string `yaml:"with"`
	Line  int               `yaml:"-"`
}

type job struct {
	Name        string         `yaml:"name"`
	RunsOn      any            `yaml:"runs-on"`
	Timeout     any            `yaml:"timeout-minutes"`
	Permissions yaml.Node      `yaml:"permissions"`
	Needs       any            `yaml:"needs"`
	Strategy    map[string]any `yaml:"strategy"`
	Steps       []yaml.Node    `yaml:"steps"`
}

type workflow struct {
	Name        string          `yaml:"name"`
	On          yaml.Node       `yaml:"on"`
	Permissions yaml.Node       `yaml:"permissions"`
	Jobs        map[string]*job `yaml:"jobs"`
}

type action struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Runs        struct {
		Using string      `yaml:"using"`
		Steps []yaml.Node `yaml:"steps"`
	} `yaml:"runs"`
}

func decodeSteps(nodes []yaml.Node) ([]step, error) {
	out := make([]step, len(nodes))
	for i := range nodes {
		if err := nodes[i].Decode(&out[i]); err != nil {
			return nil, err
		}
		out[i].Line = nodes[i].Line
	}
	return out, nil
}

// workflowFiles lists .github/workflows/*.y*ml and workflows/*/action.y*ml.
func workflowFiles(t testing.TB, root string) (wfs, actions []string) {
	t.Helper()
	for _, pat := range []string{".github/workflows/*.yml", ".github/workflows/*.yaml"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		wfs = append(wfs, m...)
	}
	for _, pat := range []string{"workflows/*/action.yml", "workflows/*/action.yaml"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		actions = append(actions, m...)
	}
	sort.Strings(wfs)
	sort.Strings(actions)
	return wfs, actions
}

// checker collects the problems of one file.
type checker struct {
	repo *repoInfo
	file string // relative to the repository root
	// actionDir is the absolute directory of the action being checked
	// (github.action_path), "" for a workflow.
	actionDir string
	problems  []string
}

func (c *checker) bad(line int, format string, a ...any) {
	c.problems = append(c.problems, fmt.Sprintf("%s:%d: %s", c.file, line, fmt.Sprintf(format, a...)))
}

var (
	shaPinRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[0-9a-f]{40}$`)
	exprRE   = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
)

func (c *checker) checkUses(s step) {
	switch {
	case strings.HasPrefix(s.Uses, "./"):
		dir := filepath.Join(c.repo.root, filepath.FromSlash(s.Uses))
		if _, err := os.Stat(filepath.Join(dir, "action.yml")); err != nil {
			c.bad(s.Line, "uses %s: no action.yml there", s.Uses)
		}
	case strings.HasPrefix(s.Uses, "docker://"):
		if !strings.Contains(s.Uses, "@sha256:") {
			c.bad(s.Line, "uses %s: a container action must be pinned by digest", s.Uses)
		}
	default:
		if !shaPinRE.MatchString(s.Uses) {
			c.bad(s.Line, "uses %s: not pinned by a full 40-hex commit SHA", s.Uses)
		}
	}
}

// checkSteps checks every step of a job or composite action.
func (c *checker) checkSteps(steps []step, composite bool) {
	for _, s := range steps {
		switch {
		case s.Uses != "" && s.Run != "":
			c.bad(s.Line, "step has both uses and run")
		case s.Uses != "":
			c.checkUses(s)
		case s.Run != "":
			if composite && s.Shell == "" {
				c.bad(s.Line, "a composite action's run step needs shell:")
			}
			if s.Shell != "" && s.Shell != "bash" {
				c.bad(s.Line, "shell %q: run steps are bash scripts", s.Shell)
			}
			c.checkRun(s.Line, s.Run)
		default:
			c.bad(s.Line, "step has neither uses nor run")
		}
	}
}

// substitute replaces GitHub expressions so the script parses as shell:
// github.action_path becomes the action's directory, anything else a
// placeholder word.
func (c *checker) substitute(script string) string {
	return exprRE.ReplaceAllStringFunc(script, func(m string) string {
		e := exprRE.FindStringSubmatch(m)[1]
		if e == "github.action_path" && c.actionDir != "" {
			return c.actionDir
		}
		if e == "github.workspace" {
			return c.repo.root
		}
		return "GHEXPR"
	})
}

// builtins a run step may use besides lockstep, make and scripts.
var builtins = map[string]bool{
	"echo": true, "printf": true, "test": true, "[": true, "cd": true, "export": true,
	"set": true, "true": true, "false": true, "exit": true, ":": true, "shift": true, "read": true, "pwd": true,
}

func (c *checker) checkRun(line int, script string) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(c.substitute(script)), c.file)
	if err != nil {
		c.bad(line, "run script does not parse as bash: %v", err)
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		c.checkCommand(line+int(call.Pos().Line()), words(call.Args))
		return true
	})
}

// word is one shell word: its literal text when it has one.
type word struct {
	lit string
	ok  bool
}

func words(ws []*syntax.Word) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		out[i].lit, out[i].ok = literal(w)
	}
	return out
}

// literal returns a word's value when it is made of literals and quoted
// literals only (no expansions).
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// checkCommand checks one simple command of a run step.
func (c *checker) checkCommand(line int, args []word) {
	if !args[0].ok {
		c.bad(line, "a command word is not a literal (a variable or expansion): run steps call lockstep, make or a repository script by name")
		return
	}
	name := args[0].lit
	switch {
	case name == "sudo":
		i := 1
		for i < len(args) && args[i].ok && strings.HasPrefix(args[i].lit, "-") {
			i++
		}
		if i < len(args) {
			c.checkCommand(line, args[i:])
		}
	case name == "env":
		i := 1
		for i < len(args) {
			switch {
			case args[i].ok && args[i].lit == "-C" && i+1 < len(args):
				i += 2
			case args[i].ok && strings.HasPrefix(args[i].lit, "-"):
				i++
			case !args[i].ok || assignRE.MatchString(args[i].lit):
				i++ // VAR=value (quoted expansions included)
			default:
				c.checkCommand(line, args[i:])
				return
			}
		}
	case builtins[name]:
	case name == "lockstep":
		for _, p := range c.repo.checkLockstep(args[1:]) {
			c.bad(line, "%s", p)
		}
	case name == "make":
		c.checkMake(line, args[1:])
	case strings.Contains(name, "/"):
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(c.repo.root, p)
		}
		p = filepath.Clean(p)
		rel, err := filepath.Rel(c.repo.root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			c.bad(line, "script %s is outside the repository", name)
			return
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			c.bad(line, "script %s does not exist in the repository", rel)
		case !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0:
			c.bad(line, "script %s is not an executable file", rel)
		}
	default:
		c.bad(line, "%s is not a lockstep verb, a make target or a repository script; put it in a script or a lockstep verb", name)
	}
}

func (c *checker) checkMake(line int, args []word) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a.ok && a.lit == "-C":
			if i+1 >= len(args) || !args[i+1].ok {
				c.bad(line, "make -C needs a literal directory")
				return
			}
			dir := filepath.Clean(args[i+1].lit)
			if dir != c.repo.root {
				c.bad(line, "make -C %s: only the repository root has lockstep's Makefile", args[i+1].lit)
			}
			i++
		case a.ok && strings.HasPrefix(a.lit, "-"):
		case !a.ok || assignRE.MatchString(a.lit):
		default:
			if !c.repo.targets[a.lit] {
				c.bad(line, "make %s: the Makefile has no such target", a.lit)
			}
		}
	}
}

// checkLockstep checks the arguments of one lockstep call: global -v, a
// registered verb, a listed subcommand, defined flags.
func (r *repoInfo) checkLockstep(args []word) []string {
	for len(args) > 0 && args[0].ok && (args[0].lit == "-v" || args[0].lit == "--verbose") {
		args = args[1:]
	}
	if len(args) == 0 {
		return []string{"lockstep without a verb"}
	}
	if !args[0].ok {
		return []string{"lockstep's verb is not a literal word"}
	}
	name := args[0].lit
	v, ok := r.verbs[name]
	if !ok {
		return []string{fmt.Sprintf("lockstep %s: no such verb is registered in cmd/lockstep (have: %s)", name, strings.Join(sortedKeys(r.verbs), ", "))}
	}
	var out []string
	rest := args[1:]
	if v.subs != nil {
		switch {
		case len(rest) == 0 || !rest[0].ok:
			out = append(out, fmt.Sprintf("lockstep %s needs a literal subcommand (one of %s)", name, strings.Join(sortedKeys(v.subs), ", ")))
		case !v.subs[rest[0].lit]:
			out = append(out, fmt.Sprintf("lockstep %s %s: %s's Usage lists no such subcommand (have: %s)", name, rest[0].lit, v.file, strings.Join(sortedKeys(v.subs), ", ")))
		}
	}
	if v.flags == nil {
		return out
	}
	for _, a := range rest {
		if !a.ok || !strings.HasPrefix(a.lit, "-") || a.lit == "-" {
			continue
		}
		if a.lit == "--" {
			break
		}
		f := strings.TrimLeft(a.lit, "-")
		f, _, _ = strings.Cut(f, "=")
		if f == "v" || f == "h" || f == "help" {
			continue
		}
		if !v.flags[f] {
			out = append(out, fmt.Sprintf("lockstep %s --%s: %s defines no such flag (have: %s)", name, f, v.file, strings.Join(sortedKeys(v.flags), ", ")))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// permissionsReadOnly reports whether a permissions node grants nothing
// beyond read: {}, read-all, or a map of read/none values.
func permissionsReadOnly(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value == "read-all" || n.Value == ""
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if v := n.Content[i].Value; v != "read" && v != "none" {
				return false
			}
		}
		return true
	}
	return false
}

func (c *checker) checkWorkflow(src []byte) *workflow {
	var wf workflow
	if err := yaml.Unmarshal(src, &wf); err != nil {
		c.bad(0, "does not parse: %v", err)
		return nil
	}
	if wf.Name == "" {
		c.bad(1, "workflow has no name")
	}
	if wf.On.Kind == 0 {
		c.bad(1, "workflow has no on: trigger")
	}
	if wf.Permissions.Kind == 0 {
		c.bad(1, "workflow declares no top-level permissions (least privilege: permissions: {})")
	} else if !permissionsReadOnly(&wf.Permissions) {
		c.bad(wf.Permissions.Line, "top-level permissions grant more than read")
	}
	if len(wf.Jobs) == 0 {
		c.bad(1, "workflow has no jobs")
	}
	for _, id := range sortedKeys(wf.Jobs) {
		j := wf.Jobs[id]
		if j.Timeout == nil {
			c.bad(1, "job %s has no timeout-minutes", id)
		}
		if j.Permissions.Kind == 0 {
			c.bad(1, "job %s declares no permissions", id)
		} else if !permissionsReadOnly(&j.Permissions) {
			c.bad(j.Permissions.Line, "job %s: permissions grant more than read", id)
		}
		steps, err := decodeSteps(j.Steps)
		if err != nil {
			c.bad(1, "job %s: steps: %v", id, err)
			continue
		}
		if len(steps) == 0 {
			c.bad(1, "job %s has no steps", id)
		}
		c.checkSteps(steps, false)
	}
	return &wf
}

func (c *checker) checkAction(src []byte) *action {
	var a action
	if err := yaml.Unmarshal(src, &a); err != nil {
		c.bad(0, "does not parse: %v", err)
		return nil
	}
	if a.Name == "" || a.Description == "" {
		c.bad(1, "action needs a name and a description")
	}
	if a.Runs.Using != "composite" {
		c.bad(1, "runs.using is %q, want composite (a thin call of lockstep)", a.Runs.Using)
	}
	steps, err := decodeSteps(a.Runs.Steps)
	if err != nil {
		c.bad(1, "steps: %v", err)
		return &a
	}
	c.checkSteps(steps, true)
	return &a
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// TestWorkflowsCallOnlyWhatExists is the check of the package doc on every
// workflow and action of the repository.
func TestWorkflowsCallOnlyWhatExists(t *testing.T) {
	repo := loadRepo(t)
	wfs, actions := workflowFiles(t, repo.root)
	if len(wfs) < 3 || len(actions) < 4 {
		t.Fatalf("found %d workflows and %d actions, want at least ci, prune-kvm, kernel-matrix and the kernel, observe, orchestrate and enable-kvm actions", len(wfs), len(actions))
	}
	for _, f := range wfs {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := &checker{repo: repo, file: rel(repo.root, f)}
		c.checkWorkflow(src)
		for _, p := range c.problems {
			t.Error(p)
		}
	}
	for _, f := range actions {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := &checker{repo: repo, file: rel(repo.root, f), actionDir: filepath.Dir(f)}
		c.checkAction(src)
		for _, p := range c.problems {
			t.Error(p)
		}
	}
}

// TestPipelineScriptCallsRegisteredVerbs holds every lockstep call of the
// pipeline script (wherever it appears in a command: behind env, step, or
// docker run) to the verb, subcommand and flag rules.
func TestPipelineScriptCallsRegisteredVerbs(t *testing.T) {
	repo := loadRepo(t)
	for _, script := range []string{"scripts/prune-kvm.sh", "scripts/kernel-matrix.sh", "workflows/enable-kvm/enable-kvm.sh"} {
		src, err := os.ReadFile(filepath.Join(repo.root, script))
		if err != nil {
			t.Fatal(err)
		}
		f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(src)), script)
		if err != nil {
			t.Fatalf("%s does not parse: %v", script, err)
		}
		calls := 0
		syntax.Walk(f, func(n syntax.Node) bool {
			call, ok := n.(*syntax.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			ws := words(call.Args)
			if ws[0].ok && (ws[0].lit == "command" || ws[0].lit == "type") {
				return true
			}
			for i, w := range ws {
				if w.ok && w.lit == "lockstep" {
					calls++
					for _, p := range repo.checkLockstep(ws[i+1:]) {
						t.Errorf("%s:%d: %s", script, call.Pos().Line(), p)
					}
					break
				}
			}
			return true
		})
		if script == "scripts/prune-kvm.sh" && calls < 6 {
			t.Errorf("%s: found %d lockstep calls, want the prune, observe, orchestrate, run and image calls", script, calls)
		}
	}
}

// TestPruneKVMWorkflowShape: prune-kvm.yml takes a key (or all) and a
// source; a plan job lists the matrix; the kernel job builds once per runner
// image and the kvm jobs only restore it; every matrix is fail-fast: false,
// and the kvm and merge jobs run also when another key failed.
func TestPruneKVMWorkflowShape(t *testing.T) {
	root := repoRoot(t)
	src, err := os.ReadFile(filepath.Join(root, ".github/workflows/prune-kvm.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On struct {
			Dispatch struct {
				Inputs map[string]struct {
					Type    string   `yaml:"type"`
					Options []string `yaml:"options"`
				} `yaml:"inputs"`
			} `yaml:"workflow_dispatch"`
		} `yaml:"on"`
	}
	if err := yaml.Unmarshal(src, &wf); err != nil {
		t.Fatal(err)
	}
	in := wf.On.Dispatch.Inputs
	if _, ok := in["key"]; !ok {
		t.Error("workflow_dispatch has no input key")
	}
	if s := in["source"]; s.Type != "choice" || strings.Join(s.Options, ",") != "fixture,reference" {
		t.Errorf("input source = %+v, want a choice of fixture and reference", s)
	}
	jobs := loadPruneKVM(t)
	for _, j := range []string{"plan", "kernel", "prune", "kvm", "merge"} {
		if _, ok := jobs[j]; !ok {
			t.Errorf("no job %s", j)
		}
	}
	for name, j := range jobs {
		if len(j.Strategy.Matrix) > 0 && (j.Strategy.FailFast == nil || *j.Strategy.FailFast) {
			t.Errorf("job %s: want strategy.fail-fast: false", name)
		}
	}
	for _, name := range []string{"kvm", "merge"} {
		if !strings.Contains(jobs[name].If, "!cancelled()") {
			t.Errorf("job %s: if = %q, want it to run when another key's job failed (!cancelled())", name, jobs[name].If)
		}
	}
	if got := jobs["plan"].Outputs["targets"]; got != "${{ steps.plan.outputs.targets }}" {
		t.Errorf("job plan: outputs.targets = %q, want the plan step's", got)
	}
	planned := false
	for _, s := range jobs["plan"].Steps {
		planned = planned || (s.ID == "plan" && strings.Contains(s.Run, "scripts/prune-kvm.sh plan") && strings.Contains(s.Run, `>> "$GITHUB_OUTPUT"`))
	}
	if !planned {
		t.Error("job plan: no step plan running scripts/prune-kvm.sh plan into GITHUB_OUTPUT")
	}
	var runners []string
	if err := func() error { n := jobs["kernel"].Strategy.Matrix["runner"]; return n.Decode(&runners) }(); err != nil || len(runners) != 2 {
		t.Errorf("job kernel: matrix.runner = %v (%v), want the two runner images", runners, err)
	}
	checkKernelBuiltOnce(t, jobs, "kvm")
	uses := map[string]bool{}
	for _, j := range jobs {
		for _, s := range j.Steps {
			uses[strings.SplitN(s.Uses, "@", 2)[0]] = true
		}
	}
	for _, a := range []string{"./workflows/setup", "./workflows/prune", "./workflows/kernel", "./workflows/observe", "./workflows/orchestrate", "./workflows/enable-kvm"} {
		if !uses[a] {
			t.Errorf("prune-kvm.yml does not use %s", a)
		}
	}
}

// TestCheckerCatches proves each check can fail, on snippets written to break
// one rule each, against the real verb table and Makefile.
func TestCheckerCatches(t *testing.T) {
	repo := loadRepo(t)
	// A registered verb to build valid calls from, whatever verbs exist now.
	known := ""
	for _, n := range sortedKeys(repo.verbs) {
		if repo.verbs[n].subs == nil && repo.verbs[n].flags != nil {
			known = n
			break
		}
	}
	header := "name: t\non: push\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-24.04\n    timeout-minutes: 5\n    permissions:\n      contents: read\n    steps:\n"
	cases := []struct {
		Name, Steps, Want string
	}{
		{"tag instead of SHA", "      - uses: actions/checkout@v4\n", "not pinned by a full 40-hex commit SHA"},
		{"short SHA", "      - uses: actions/checkout@3d3c42e5\n", "not pinned"},
		{"missing local action", "      - uses: ./workflows/nope\n", "no action.yml there"},
		{"unknown verb", "      - run: lockstep frobnicate --x\n", "no such verb is registered"},
		{"unknown make target", "      - run: make no-such-target\n", "the Makefile has no such target"},
		{"missing script", "      - run: scripts/no-such.sh --x\n", "does not exist in the repository"},
		{"non-executable file", "      - run: ./go.mod\n", "is not an executable file"},
		{"other program", "      - run: curl -fsSL example.invalid | bash\n", "curl is not a lockstep verb"},
		{"program behind sudo", "      - run: sudo apt-get install -y qemu\n", "apt-get is not a lockstep verb"},
		{"program in a substitution", "      - run: echo \"$(uname -r)\"\n", "uname is not a lockstep verb"},
		{"variable as command", "      - run: '\"$TOOL\" --x'\n", "not a literal"},
		{"make -C elsewhere", "      - run: make -C /tmp build\n", "only the repository root"},
		{"bad shell", "      - run: 'if then fi ('\n", "does not parse as bash"},
	}
	if known != "" {
		cases = append(cases, struct{ Name, Steps, Want string }{"unknown flag", "      - run: lockstep " + known + " --no-such-flag-here\n", "defines no such flag"})
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			c := &checker{repo: repo, file: "t.yml"}
			c.checkWorkflow([]byte(header + tc.Steps))
			if !strings.Contains(strings.Join(c.problems, "\n"), tc.Want) {
				t.Errorf("problems = %q, want one containing %q", c.problems, tc.Want)
			}
		})
	}
	t.Run("write permission", func(t *testing.T) {
		c := &checker{repo: repo, file: "t.yml"}
		c.checkWorkflow([]byte(strings.Replace(header, "contents: read", "contents: write", 1) + "      - run: make build\n"))
		if !strings.Contains(strings.Join(c.problems, "\n"), "grant more than read") {
			t.Errorf("problems = %q, want a permissions problem", c.problems)
		}
	})
	t.Run("no timeout", func(t *testing.T) {
		c := &checker{repo: repo, file: "t.yml"}
		c.checkWorkflow([]byte(strings.Replace(header, "    timeout-minutes: 5\n", "", 1) + "      - run: make build\n"))
		if !strings.Contains(strings.Join(c.problems, "\n"), "no timeout-minutes") {
			t.Errorf("problems = %q, want a timeout problem", c.problems)
		}
	})
	t.Run("clean step passes", func(t *testing.T) {
		c := &checker{repo: repo, file: "t.yml"}
		c.checkWorkflow([]byte(header + "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1\n      - run: |\n          make build\n          echo \"x=1\" >> \"$GITHUB_OUTPUT\"\n          scripts/prune-kvm.sh --help || true\n"))
		if len(c.problems) != 0 {
			t.Errorf("problems = %q, want none", c.problems)
		}
	})
	t.Run("composite run step without shell", func(t *testing.T) {
		c := &checker{repo: repo, file: "a.yml", actionDir: filepath.Join(repo.root, "workflows", "kernel")}
		c.checkAction([]byte("name: a\ndescription: d\nruns:\n  using: composite\n  steps:\n    - run: make build\n"))
		if !strings.Contains(strings.Join(c.problems, "\n"), "needs shell:") {
			t.Errorf("problems = %q, want a shell problem", c.problems)
		}
	})
}

// TestVerbParsing checks the verb reader on a synthetic package: Name,
// Usage subcommands, flags through a helper function, and an unreadable
// flag name making the flag set unknown.
func TestVerbParsing(t *testing.T) {
	dir := t.TempDir()
	src := `package main
import "flag"
func init() {
	verbs.Register(&cli.Verb{Name: "kernel", Usage: "kernel {build|verify|key} [--pin <p>]",
		Flags: func(fs *flag.FlagSet) func() int {
			pin := fs.String("pin", "", "")
			addCommon(fs)
			_ = pin
			return nil
		}})
	verbs.Register(&cli.Verb{Name: "run", Usage: "run --config <f>… -- <cmd>…",
		Flags: func(f *flag.FlagSet) func() int {
			var m multiFlag
			f.Var(&m, "config", "")
			f.BoolVar(new(bool), "log-subprocesses", false, "")
			return nil
		}})
	verbs.Register(&cli.Verb{Name: "named", Usage: "named [--n <x>]", Flags: namedFlags})
	verbs.Register(&cli.Verb{Name: "odd", Usage: "odd",
		Flags: func(fs *flag.FlagSet) func() int {
			fs.String(flagName, "", "")
			return nil
		}})
}
const flagName = "x"
func addCommon(set *flag.FlagSet) { set.Bool("json", false, "") }
func namedFlags(fs *flag.FlagSet) func() int { fs.Int("n", 0, ""); return nil }
`
	if err := os.WriteFile(filepath.Join(dir, "v.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	verbs, err := parseVerbs(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := verbs["kernel"]
	if k == nil || strings.Join(sortedKeys(k.subs), ",") != "build,key,verify" || strings.Join(sortedKeys(k.flags), ",") != "json,pin" {
		t.Fatalf("kernel = %+v, want subs build,key,verify and flags json,pin", k)
	}
	r := verbs["run"]
	if r == nil || r.subs != nil || strings.Join(sortedKeys(r.flags), ",") != "config,log-subprocesses" {
		t.Fatalf("run = %+v, want no subs and flags config,log-subprocesses", r)
	}
	if n := verbs["named"]; n == nil || strings.Join(sortedKeys(n.flags), ",") != "n" {
		t.Fatalf("named = %+v, want the flag n read from namedFlags", n)
	}
	if o := verbs["odd"]; o == nil || o.flags != nil {
		t.Fatalf("odd = %+v, want unknown flags (nil)", o)
	}
	repo := &repoInfo{verbs: verbs}
	lit := func(s ...string) []word {
		out := make([]word, len(s))
		for i := range s {
			out[i] = word{s[i], true}
		}
		return out
	}
	if p := repo.checkLockstep(lit("kernel", "key", "--pin", "7.2.13")); len(p) != 0 {
		t.Errorf("kernel key --pin: problems %q, want none", p)
	}
	if p := repo.checkLockstep(lit("kernel", "path")); len(p) != 1 || !strings.Contains(p[0], "no such subcommand") {
		t.Errorf("kernel path: problems %q, want the subcommand refused", p)
	}
	if p := repo.checkLockstep(lit("run", "--config", "a", "--", "cmd", "--not-a-flag")); len(p) != 0 {
		t.Errorf("run … -- cmd --not-a-flag: problems %q, want none (flags end at --)", p)
	}
	if p := repo.checkLockstep(lit("-v", "run", "--confgi=a")); len(p) != 1 {
		t.Errorf("run --confgi: problems %q, want one", p)
	}
}

// TestVerbParsingFindsTheCLI: the parser finds the verbs cmd/lockstep
// registers, so a change to how verbs are registered fails here, by name,
// rather than as every workflow's call to an unknown verb.
func TestVerbParsingFindsTheCLI(t *testing.T) {
	verbs, err := parseVerbs(filepath.Join("..", "cmd", "lockstep"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"boot", "image", "kernel", "observe", "orchestrate", "probe", "prune", "run", "verify"} {
		if verbs[v] == nil {
			t.Errorf("verb %s not found in cmd/lockstep (found %v)", v, sortedKeys(verbs))
		}
	}
}
