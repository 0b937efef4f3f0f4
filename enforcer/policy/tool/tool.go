package tool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// JSONSchema versions the document `lockstep policy check|hash --json` prints.
const JSONSchema = 1

// The exit statuses of an operation.
const (
	statusOK   = 0
	statusFail = 1
)

// Tool runs the operations: Out gets the results, Err the problems, each
// line prefixed "lockstep policy: ".
type Tool struct {
	Out, Err io.Writer
	// JSON makes Check and Hash print nothing: the caller prints the
	// Report they return.
	JSON bool
	// Exercise makes Check require [read], [execute] and [ioctl] paths to
	// exist (an exercise config); Strict makes a warning a problem.
	Exercise, Strict bool
	// Write makes Fmt rewrite each file in place; List makes it list the
	// files not in canonical form.
	Write, List bool
	// Normalise makes Union raise strict-subset nesting.
	Normalise bool
	// Parsed, when set, is called by Fmt with Write between parsing a file
	// and replacing it. Tests only: it stands for a parse long enough to
	// swap the file's path meanwhile.
	Parsed func(file string)
}

// Problem is one problem of a file: where, and what.
type Problem struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Msg  string `json:"message"`
}

// FileResult is one file as Check and Hash report it.
type FileResult struct {
	File     string    `json:"file"`
	OK       bool      `json:"ok"`
	Hash     string    `json:"hash,omitempty"`
	FileHash string    `json:"file_sha256,omitempty"`
	Problems []Problem `json:"problems"`
	Warnings []string  `json:"warnings"`
}

// Report is the document `lockstep policy check|hash --json` prints.
type Report struct {
	Schema int          `json:"schema_version"`
	Files  []FileResult `json:"files"`
}

// printProblems writes each problem of err on its own line and returns how
// many there were.
func (t *Tool) printProblems(err error) int {
	var el policy.ErrorList
	if errors.As(err, &el) {
		for _, e := range el {
			fmt.Fprintf(t.Err, "lockstep policy: %v\n", e)
		}
		return len(el)
	}
	fmt.Fprintf(t.Err, "lockstep policy: %v\n", err)
	return 1
}

// fail says err and returns statusFail.
func (t *Tool) fail(err error) int {
	fmt.Fprintf(t.Err, "lockstep policy: %v\n", err)
	return statusFail
}

// CheckFile checks one file: its problems (with exercise, paths that must
// exist here and paths run cannot inspect too) and its warnings, which
// strict makes fail it.
func CheckFile(file string, exercise, strict bool) FileResult {
	r := FileResult{File: file, Problems: []Problem{}, Warnings: []string{}}
	p, err := policy.ParseFile(file)
	if err != nil {
		var el policy.ErrorList
		if errors.As(err, &el) {
			for _, e := range el {
				r.Problems = append(r.Problems, Problem{e.File, e.Line, e.Msg})
			}
		}
		return r
	}
	if exercise {
		r.Problems = append(r.Problems, exerciseProblems(file, p)...)
	}
	home, _ := os.UserHomeDir()
	for _, w := range wide.Check(p, wide.Options{Home: home}) {
		if w.Code.Refused() {
			r.Problems = append(r.Problems, Problem{file, 0, w.String()})
			continue
		}
		r.Warnings = append(r.Warnings, w.String())
	}
	data, _ := policy.ReadFile(file)
	r.OK = len(r.Problems) == 0 && !(strict && len(r.Warnings) > 0)
	r.Hash, r.FileHash = p.Hash(), policy.FileSHA256(data)
	return r
}

// exerciseProblems are an exercise config's paths that do not exist here
// or cannot be inspected.
func exerciseProblems(file string, p *policy.Policy) []Problem {
	var out []Problem
	for _, m := range p.MissingPaths() {
		out = append(out, Problem{file, 0, fmt.Sprintf("exercise config names %q in [read], [execute] or [ioctl], and it does not exist here", m)})
	}
	// run refuses a policy with a path it cannot stat, in any section.
	_, unusable := p.StatPaths(policy.FilesystemSections...)
	for _, u := range unusable {
		out = append(out, Problem{file, 0, fmt.Sprintf("names %q, which cannot be inspected here (%v); lockstep run refuses it", u.Path, u.Err)})
	}
	return out
}

// Check checks each file and, unless JSON, prints its problems and
// warnings and a line per file.
func (t *Tool) Check(files []string) (*Report, int) {
	rep := &Report{Schema: JSONSchema}
	code := statusOK
	for _, f := range files {
		r := CheckFile(f, t.Exercise, t.Strict)
		rep.Files = append(rep.Files, r)
		if !r.OK {
			code = statusFail
		}
		if !t.JSON {
			t.printCheck(f, r)
		}
	}
	return rep, code
}

// printCheck prints one file's check.
func (t *Tool) printCheck(f string, r FileResult) {
	for _, p := range r.Problems {
		e := &policy.Error{File: p.File, Line: p.Line, Msg: p.Msg}
		fmt.Fprintf(t.Err, "lockstep policy: %v\n", e)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(t.Err, "lockstep policy: %s: warning: %s\n", f, w)
	}
	switch {
	case len(r.Problems) > 0:
		fmt.Fprintf(t.Out, "%s: %s\n", f, cli.Plural(len(r.Problems), "problem"))
	case !r.OK:
		fmt.Fprintf(t.Out, "%s: %s, refused by --strict\n", f, cli.Plural(len(r.Warnings), "warning"))
	case len(r.Warnings) > 0:
		fmt.Fprintf(t.Out, "%s: ok %s, %s\n", f, r.Hash, cli.Plural(len(r.Warnings), "warning"))
	default:
		fmt.Fprintf(t.Out, "%s: ok %s\n", f, r.Hash)
	}
}

// Fmt prints each file's canonical rendering, or with Write rewrites the
// file in it, or with List names the files whose bytes differ from it.
func (t *Tool) Fmt(files []string) int {
	code := statusOK
	for _, f := range files {
		if t.Write {
			if !t.fmtWrite(f) {
				code = statusFail
			}
			continue
		}
		data, err := policy.ReadFile(f)
		var p *policy.Policy
		if err == nil {
			p, err = policy.Parse(f, data)
		}
		if err != nil {
			t.printProblems(err)
			code = statusFail
			continue
		}
		out := p.Render()
		if t.List {
			if !bytes.Equal(out, data) {
				fmt.Fprintln(t.Out, f)
				code = statusFail
			}
			continue
		}
		if _, err := t.Out.Write(out); err != nil {
			return t.fail(err)
		}
	}
	return code
}

// fmtWrite rewrites f in canonical form. The file is opened once: it is
// read through that descriptor, and the file replaced is the one read
// (safefile.Replacer), so a link swapped in while the policy is parsed
// never turns the write to another file. It reports whether f is fine.
func (t *Tool) fmtWrite(f string) bool {
	r, err := safefile.OpenReplace(f)
	if err != nil {
		// policy.ReadFile names the common refusals as check does.
		if _, perr := policy.ReadFile(f); perr != nil {
			t.printProblems(perr)
		} else {
			fmt.Fprintf(t.Err, "lockstep policy: fmt -w %s: %v\n", f, err)
		}
		return false
	}
	defer r.Close()
	data, err := r.Read(policy.MaxFileBytes)
	if err != nil {
		fmt.Fprintf(t.Err, "lockstep policy: %v\n", err)
		return false
	}
	p, err := policy.Parse(f, data)
	if err != nil {
		t.printProblems(err)
		return false
	}
	out := p.Render()
	if bytes.Equal(out, data) {
		return true
	}
	if t.Parsed != nil {
		t.Parsed(f)
	}
	if err := r.Replace(out); err != nil {
		fmt.Fprintf(t.Err, "lockstep policy: fmt -w %s: %v\n", f, err)
		return false
	}
	return true
}

// Hash prints "sha256:<hex>  F" per file, or with JSON reports each.
func (t *Tool) Hash(files []string) (*Report, int) {
	rep := &Report{Schema: JSONSchema}
	code := statusOK
	for _, f := range files {
		p, err := policy.ParseFile(f)
		if err != nil {
			if t.JSON {
				rep.Files = append(rep.Files, CheckFile(f, false, false))
			} else {
				t.printProblems(err)
			}
			code = statusFail
			continue
		}
		if t.JSON {
			data, _ := policy.ReadFile(f)
			rep.Files = append(rep.Files, FileResult{File: f, OK: true, Hash: p.Hash(), FileHash: policy.FileSHA256(data), Problems: []Problem{}, Warnings: []string{}})
			continue
		}
		fmt.Fprintf(t.Out, "%s  %s\n", p.Hash(), f)
	}
	return rep, code
}

// Diff lists the grants only in a ("- ") and only in b ("+ "): status 1
// when there are any.
func (t *Tool) Diff(a, b string) int {
	pa, errA := policy.ParseFile(a)
	pb, errB := policy.ParseFile(b)
	if errA != nil || errB != nil {
		for _, err := range []error{errA, errB} {
			if err != nil {
				t.printProblems(err)
			}
		}
		return statusFail
	}
	d := policy.Diff(pa, pb)
	for _, l := range d {
		fmt.Fprintln(t.Out, l)
	}
	if len(d) > 0 {
		return statusFail
	}
	return statusOK
}

// Union prints the files combined as run combines them.
func (t *Tool) Union(files []string) int {
	var ps []*policy.Policy
	var errs policy.ErrorList
	for _, f := range files {
		p, err := policy.ParseFile(f)
		if err != nil {
			var el policy.ErrorList
			errors.As(err, &el)
			errs = append(errs, el...)
			continue
		}
		ps = append(ps, p)
	}
	if len(errs) > 0 {
		t.printProblems(errs)
		return statusFail
	}
	u := policy.Union(ps...)
	if t.Normalise {
		n, err := u.NormaliseHierarchy()
		if err != nil {
			return t.fail(err)
		}
		u = n
	}
	if _, err := t.Out.Write(u.Render()); err != nil {
		return t.fail(err)
	}
	return statusOK
}
