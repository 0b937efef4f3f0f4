package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy/wide"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// policyJSONSchema versions the document `lockstep policy check|hash --json` prints.
const policyJSONSchema = 1

func init() {
	register(&verb{
		Name:  "policy",
		Usage: "policy {check|fmt|hash|diff|union} [--json] [-w] [-l] [--exercise] [--strict] [--normalise] <file>…",
		Short: "check, format, hash, compare and merge policy (.cfg) files",
		Long: `Works on policy files without applying them (nothing here touches Landlock).

  check F…     parse each file and report every problem at once, as
               file:line: message; --exercise also requires [read],
               [execute] and [ioctl] paths to exist here, as an exercise
               config must, and refuses a path run cannot inspect (too long
               a name, a loop). Then warn, each with a stable code, about
               grants wider than they look on this machine: a symbolic
               link leading elsewhere (W001, naming what it grants), /
               (W002), /proc or /sys whole (W003), $HOME (W004), a
               credential store (W005), strict-subset nesting (W006).
               --strict makes any warning exit 1.
  fmt F…       print the canonical rendering (the form Hash is taken of);
               -w rewrites the files in place, -l lists the files whose
               bytes differ from their canonical form (exit 1 if any).
  hash F…      print "sha256:<hex>  F" per file: the SHA-256 of the
               canonical rules, comments excluded (two files that grant
               the same hash alike; run --expect-hash takes this value).
  diff A B     list grants only in A ("- ") and only in B ("+ ");
               exit 0 when they grant the same, 1 when they differ.
  union F…     combine the files as run does (paths and rules unioned,
               limits: 0 switches off and wins, else the largest) and print
               the result; --normalise raises strict-subset nesting.

Exit status: 0 ok (warnings too, unless --strict), 1 problems (or
differences, or warnings under --strict), 2 usage. The format is
described in docs/policy.md.`,
		Example: `# every problem of a base, with line numbers; warnings fail too
$ lockstep policy check --strict testdata/policies/BaseLanguage-java.cfg
# the hash to pin with lockstep run --expect-hash
$ lockstep policy hash BaseLanguage-java.cfg exercises/java_fixture.cfg`,
		Flags: policyFlags,
	})
}

// policyFlags declares policy's flags on fs and returns the verb.
func policyFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	o := &policyOpts{fs: fs}
	fs.BoolVar(&o.json, "json", false, "check, hash: print one JSON document (schema 1) on stdout")
	fs.BoolVar(&o.write, "w", false, "fmt: rewrite each file in canonical form")
	fs.BoolVar(&o.list, "l", false, "fmt: list files that are not in canonical form")
	fs.BoolVar(&o.exercise, "exercise", false, "check: require [read], [execute] and [ioctl] paths to exist (exercise config)")
	fs.BoolVar(&o.strict, "strict", false, "check: any warning (a grant wider than it looks) exits 1")
	fs.BoolVar(&o.normalise, "normalise", false, "union: raise paths whose rights are a strict subset of an ancestor's")
	return o.run
}

// run parses the flags that follow the subcommand and runs it.
func (o *policyOpts) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["policy"]
	if len(args) == 0 {
		return usageExit(io, v, usagef("no subcommand; want one of check, fmt, hash, diff, union"))
	}
	sub := args[0]
	// Flags may also follow the subcommand.
	if err := o.fs.Parse(args[1:]); err != nil {
		return usageExit(io, v, err)
	}
	files := o.fs.Args()
	if len(files) == 0 {
		return usageExit(io, v, usagef("policy %s: no files given", sub))
	}
	switch sub {
	case "check":
		return policyCheck(io, o, files)
	case "fmt":
		if o.write && o.list {
			return usageExit(io, v, usagef("-w and -l exclude each other"))
		}
		return policyFmt(io, o, files)
	case "hash":
		return policyHash(io, o, files)
	case "diff":
		if len(files) != 2 {
			return usageExit(io, v, usagef("policy diff takes exactly two files, got %d", len(files)))
		}
		return policyDiff(io, files[0], files[1])
	case "union":
		return policyUnion(io, o, files)
	}
	return usageExit(io, v, usagef("unknown subcommand %q; want one of check, fmt, hash, diff, union", sub))
}

// policyOpts are policy's flags.
type policyOpts struct {
	fs                                             *flag.FlagSet
	json, write, list, exercise, normalise, strict bool
}

// printProblems writes each problem of err on its own line and returns how
// many there were.
func printProblems(io *stdio, err error) int {
	var el policy.ErrorList
	if errors.As(err, &el) {
		for _, e := range el {
			fmt.Fprintf(io.err, "lockstep policy: %v\n", e)
		}
		return len(el)
	}
	fmt.Fprintf(io.err, "lockstep policy: %v\n", err)
	return 1
}

type policyProblem struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Msg  string `json:"message"`
}

type policyFileResult struct {
	File     string          `json:"file"`
	OK       bool            `json:"ok"`
	Hash     string          `json:"hash,omitempty"`
	FileHash string          `json:"file_sha256,omitempty"`
	Problems []policyProblem `json:"problems"`
	Warnings []string        `json:"warnings"`
}

type policyReport struct {
	Schema int                `json:"schema_version"`
	Files  []policyFileResult `json:"files"`
}

func checkOne(file string, exercise, strict bool) policyFileResult {
	r := policyFileResult{File: file, Problems: []policyProblem{}, Warnings: []string{}}
	p, err := policy.ParseFile(file)
	if err != nil {
		var el policy.ErrorList
		if errors.As(err, &el) {
			for _, e := range el {
				r.Problems = append(r.Problems, policyProblem{e.File, e.Line, e.Msg})
			}
		}
		return r
	}
	if exercise {
		for _, m := range p.MissingPaths() {
			r.Problems = append(r.Problems, policyProblem{file, 0, fmt.Sprintf("exercise config names %q in [read], [execute] or [ioctl], and it does not exist here", m)})
		}
		// run refuses a policy with a path it cannot stat, in any section.
		_, unusable := p.StatPaths(policy.FilesystemSections...)
		for _, u := range unusable {
			r.Problems = append(r.Problems, policyProblem{file, 0, fmt.Sprintf("names %q, which cannot be inspected here (%v); lockstep run refuses it", u.Path, u.Err)})
		}
	}
	home, _ := os.UserHomeDir()
	for _, w := range wide.Check(p, wide.Options{Home: home}) {
		if w.Code.Refused() {
			r.Problems = append(r.Problems, policyProblem{file, 0, w.String()})
			continue
		}
		r.Warnings = append(r.Warnings, w.String())
	}
	data, _ := policy.ReadFile(file)
	r.OK = len(r.Problems) == 0 && !(strict && len(r.Warnings) > 0)
	r.Hash, r.FileHash = p.Hash(), policy.FileSHA256(data)
	return r
}

func policyCheck(io *stdio, o *policyOpts, files []string) int {
	rep := policyReport{Schema: policyJSONSchema}
	code := exitOK
	for _, f := range files {
		r := checkOne(f, o.exercise, o.strict)
		rep.Files = append(rep.Files, r)
		if !r.OK {
			code = exitFail
		}
		if o.json {
			continue
		}
		for _, p := range r.Problems {
			e := &policy.Error{File: p.File, Line: p.Line, Msg: p.Msg}
			fmt.Fprintf(io.err, "lockstep policy: %v\n", e)
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(io.err, "lockstep policy: %s: warning: %s\n", f, w)
		}
		switch {
		case len(r.Problems) > 0:
			fmt.Fprintf(io.out, "%s: %s\n", f, plural(len(r.Problems), "problem"))
		case !r.OK:
			fmt.Fprintf(io.out, "%s: %s, refused by --strict\n", f, plural(len(r.Warnings), "warning"))
		case len(r.Warnings) > 0:
			fmt.Fprintf(io.out, "%s: ok %s, %s\n", f, r.Hash, plural(len(r.Warnings), "warning"))
		default:
			fmt.Fprintf(io.out, "%s: ok %s\n", f, r.Hash)
		}
	}
	if o.json {
		return writeJSON(io, "policy", rep, code, exitFail)
	}
	return code
}

// plural is "1 warning", "2 warnings": the count and a noun whose plural
// takes an s, as every summary line of the verbs writes them.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeJSON prints v as indented JSON and returns code, the verb's status;
// when the output cannot be written whole (a full disk, a closed pipe) it
// says so and returns the worse of code and failed: a reader of a cut
// document must not take the status for the result.
func writeJSON(io *stdio, verb string, v any, code, failed int) int {
	enc := json.NewEncoder(io.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(io, verb, verify.WorseStatus(code, failed), fmt.Errorf("the JSON result was not written whole: %w", err))
	}
	return code
}

func policyFmt(io *stdio, o *policyOpts, files []string) int {
	code := exitOK
	for _, f := range files {
		if o.write {
			if !fmtWrite(io, f) {
				code = exitFail
			}
			continue
		}
		data, err := policy.ReadFile(f)
		if err != nil {
			printProblems(io, err)
			code = exitFail
			continue
		}
		p, err := policy.Parse(f, data)
		if err != nil {
			printProblems(io, err)
			code = exitFail
			continue
		}
		out := p.Render()
		if o.list {
			if !bytes.Equal(out, data) {
				fmt.Fprintln(io.out, f)
				code = exitFail
			}
			continue
		}
		if _, err := io.out.Write(out); err != nil {
			return fail(io, "policy", exitFail, err)
		}
	}
	return code
}

// fmtParsed, when set, is called by fmt -w between parsing a file and
// replacing it. Tests only: it stands for a parse long enough to swap the
// file's path meanwhile.
var fmtParsed func(file string)

// fmtWrite rewrites f in canonical form. The file is opened once: it is
// read through that descriptor, and the file replaced is the one read
// (safefile.Replacer), so a link swapped in while the policy is parsed
// never turns the write to another file. It reports whether f is fine.
func fmtWrite(io *stdio, f string) bool {
	r, err := safefile.OpenReplace(f)
	if err != nil {
		// policy.ReadFile names the common refusals as check does.
		if _, perr := policy.ReadFile(f); perr != nil {
			printProblems(io, perr)
		} else {
			fmt.Fprintf(io.err, "lockstep policy: fmt -w %s: %v\n", f, err)
		}
		return false
	}
	defer r.Close()
	data, err := r.Read(policy.MaxFileBytes)
	if err != nil {
		fmt.Fprintf(io.err, "lockstep policy: %v\n", err)
		return false
	}
	p, err := policy.Parse(f, data)
	if err != nil {
		printProblems(io, err)
		return false
	}
	out := p.Render()
	if bytes.Equal(out, data) {
		return true
	}
	if fmtParsed != nil {
		fmtParsed(f)
	}
	if err := r.Replace(out); err != nil {
		fmt.Fprintf(io.err, "lockstep policy: fmt -w %s: %v\n", f, err)
		return false
	}
	return true
}

func policyHash(io *stdio, o *policyOpts, files []string) int {
	rep := policyReport{Schema: policyJSONSchema}
	code := exitOK
	for _, f := range files {
		p, err := policy.ParseFile(f)
		if err != nil {
			if o.json {
				rep.Files = append(rep.Files, checkOne(f, false, false))
			} else {
				printProblems(io, err)
			}
			code = exitFail
			continue
		}
		if o.json {
			data, _ := policy.ReadFile(f)
			rep.Files = append(rep.Files, policyFileResult{File: f, OK: true, Hash: p.Hash(), FileHash: policy.FileSHA256(data), Problems: []policyProblem{}, Warnings: []string{}})
			continue
		}
		fmt.Fprintf(io.out, "%s  %s\n", p.Hash(), f)
	}
	if o.json {
		return writeJSON(io, "policy", rep, code, exitFail)
	}
	return code
}

func policyDiff(io *stdio, a, b string) int {
	pa, errA := policy.ParseFile(a)
	pb, errB := policy.ParseFile(b)
	if errA != nil || errB != nil {
		for _, err := range []error{errA, errB} {
			if err != nil {
				printProblems(io, err)
			}
		}
		return exitFail
	}
	d := policy.Diff(pa, pb)
	for _, l := range d {
		fmt.Fprintln(io.out, l)
	}
	if len(d) > 0 {
		return exitFail
	}
	return exitOK
}

func policyUnion(io *stdio, o *policyOpts, files []string) int {
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
		printProblems(io, errs)
		return exitFail
	}
	u := policy.Union(ps...)
	if o.normalise {
		n, err := u.NormaliseHierarchy()
		if err != nil {
			return fail(io, "policy", exitFail, err)
		}
		u = n
	}
	if _, err := io.out.Write(u.Render()); err != nil {
		return fail(io, "policy", exitFail, err)
	}
	return exitOK
}
