package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Func is one function or method declaration and its length.
type Func struct {
	File  string // slash-separated path relative to the measured root
	Line  int    // line of the func keyword
	Name  string // Name, or (Recv).Name for a method
	Lines int    // from the func keyword to the closing brace, both included
}

// String is "file:line Name (N lines)".
func (f Func) String() string {
	return fmt.Sprintf("%s:%d %s (%d lines)", f.File, f.Line, f.Name, f.Lines)
}

// Key is "file:Name", which names a function across edits that move it.
func (f Func) Key() string { return f.File + ":" + f.Name }

// Measure returns every function declared in the non-test, non-generated Go
// files under root, longest first. Directories named testdata or vendor, and
// those starting with "." or "_", are skipped, as the go command skips them.
func Measure(root string) ([]Func, error) {
	var funcs []Func
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		found, err := measureFile(path, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		funcs = append(funcs, found...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("measure functions under %s: %w", root, err)
	}
	sort.SliceStable(funcs, func(i, j int) bool {
		if funcs[i].Lines != funcs[j].Lines {
			return funcs[i].Lines > funcs[j].Lines
		}
		return funcs[i].Key() < funcs[j].Key()
	})
	return funcs, nil
}

func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// measureFile returns the functions of one file, none if it is generated.
func measureFile(path, rel string) ([]Func, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(file) {
		return nil, nil
	}
	var funcs []Func
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
		funcs = append(funcs, Func{File: rel, Line: start.Line, Name: funcName(fn), Lines: end.Line - start.Line + 1})
	}
	return funcs, nil
}

// funcName is Name for a function and (Recv).Name or (*Recv).Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + recvType(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func recvType(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.IndexExpr: // generic receiver T[P]
		return recvType(t.X)
	case *ast.IndexListExpr: // generic receiver T[P, Q]
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
