package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"
)

// Exit statuses, as docs/exit-codes.md lists them. A verb that meets
// several failures keeps the most severe. record generate's own statuses
// are recorder.StatusCreatedRead (4), StatusRefused (5) and
// StatusIncomplete (6).
const (
	ExitOK            = 0
	ExitFail          = 1   // a check failed, problems found, an exercise failed
	ExitUsage         = 2   // the command line was wrong
	ExitIndeterminate = 3   // nothing trustworthy was observed (also: kernel config unfit)
	ExitGuestSetup    = 70  // the guest could not be set up
	ExitTimeout       = 124 // the policy's timeout ended the command
	ExitRefused       = 125 // the policy or the kernel refused; nothing ran
	ExitCannotExec    = 126 // the command exists but cannot be executed
	ExitNotFound      = 127 // the command does not exist
	ExitCapPassed     = 137 // a resource cap was passed (killed)
)

// Stdio carries the streams and terminal facts a verb may use; tests fill
// it with buffers.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
	// ErrTTY is true when stderr is a terminal: progress is shown then, or
	// with -v.
	ErrTTY  bool
	Verbose bool
}

// NewStdio is the process's own streams.
func NewStdio() *Stdio {
	return &Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, ErrTTY: term.IsTerminal(int(os.Stderr.Fd()))}
}

// Verb is one subcommand: its help text, its flags and its run function.
type Verb struct {
	Name    string
	Usage   string // e.g. "run --config <file>… [--base-dir <dir>] -- <cmd>…"
	Short   string // one line for the verb list
	Long    string // paragraphs for `lockstep help <verb>`
	Example string // "# comment\n$ lockstep …" lines
	// Flags declares the verb's flags on fs and returns the function that
	// runs it with the remaining arguments.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, io *Stdio, args []string) int
	// Hidden verbs are left out of the list and the docs.
	Hidden bool
}

// Verbs is the verb table of a command line, by name.
type Verbs map[string]*Verb

// Register adds a verb; each verb lives in its own file and registers in
// init.
func (vs Verbs) Register(v *Verb) {
	if _, dup := vs[v.Name]; dup {
		panic("lockstep: verb registered twice: " + v.Name)
	}
	vs[v.Name] = v
}

// Sorted are the verbs not hidden, by name.
func (vs Verbs) Sorted() []*Verb {
	var out []*Verb
	for _, v := range vs {
		if !v.Hidden {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UsageError marks an error as a usage error: exit 2 with the usage line.
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

// Usagef is a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// Run runs the command line args: the global options, then a verb (its
// flags and arguments), help or the version (the verb "version").
func (vs Verbs) Run(ctx context.Context, args []string, io *Stdio) int {
	var global []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		global = append(global, args[0])
		args = args[1:]
	}
	for _, g := range global {
		switch g {
		case "-v", "--verbose":
			io.Verbose = true
		case "-h", "--help", "-help":
			vs.PrintTopHelp(io.Out)
			return ExitOK
		case "--version", "-version":
			return vs.RunVerb(ctx, vs["version"], io, nil)
		default:
			fmt.Fprintf(io.Err, "lockstep: unknown option %s\nRun 'lockstep help' for the verbs.\n", g)
			return ExitUsage
		}
	}
	if len(args) == 0 {
		vs.PrintTopHelp(io.Err)
		return ExitUsage
	}
	name, rest := args[0], args[1:]
	if name == "help" {
		return vs.help(io, rest)
	}
	v, ok := vs[name]
	if !ok {
		fmt.Fprintf(io.Err, "lockstep: unknown verb %q\nRun 'lockstep help' for the verbs.\n", name)
		return ExitUsage
	}
	return vs.RunVerb(ctx, v, io, rest)
}

// RunVerb parses v's flags from args and runs it.
func (vs Verbs) RunVerb(ctx context.Context, v *Verb, io *Stdio, args []string) int {
	fs := flag.NewFlagSet(v.Name, flag.ContinueOnError)
	fs.SetOutput(io.Err)
	fs.BoolVar(&io.Verbose, "v", io.Verbose, "verbose: progress and every external command on stderr")
	fs.Usage = func() {}
	runFn := v.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			PrintVerbHelp(io.Out, v)
			return ExitOK
		}
		return UsageExit(io, v, err)
	}
	return runFn(ctx, io, fs.Args())
}

// UsageExit prints a usage error of v with its usage line and returns
// ExitUsage.
func UsageExit(io *Stdio, v *Verb, err error) int {
	fmt.Fprintf(io.Err, "lockstep %s: %v\nusage: lockstep %s\nRun 'lockstep help %s' for details.\n", v.Name, err, v.Usage, v.Name)
	return ExitUsage
}

// Fail prints a verb's error as one line and returns code.
func Fail(io *Stdio, v string, code int, err error) int {
	fmt.Fprintf(io.Err, "lockstep %s: %v\n", v, err)
	return code
}

// PrintTopHelp writes the help of the command line: its verbs.
func (vs Verbs) PrintTopHelp(w io.Writer) {
	fmt.Fprintln(w, "lockstep: Landlock policies on pinned kernels in throwaway QEMU guests, checked against audit records.")
	fmt.Fprintln(w, "\nUsage: lockstep [-v] <verb> [flags] [args]\n       lockstep --version\n\nVerbs:")
	for _, v := range vs.Sorted() {
		fmt.Fprintf(w, "  %-12s %s\n", v.Name, v.Short)
	}
	fmt.Fprintln(w, "\nRun 'lockstep help <verb>' or 'lockstep <verb> --help' for a verb's flags and an example.")
}

// help is `lockstep help [verb]`.
func (vs Verbs) help(io *Stdio, args []string) int {
	if len(args) == 0 {
		vs.PrintTopHelp(io.Out)
		return ExitOK
	}
	v, ok := vs[args[0]]
	if !ok {
		fmt.Fprintf(io.Err, "lockstep help: unknown verb %q\n", args[0])
		return ExitUsage
	}
	PrintVerbHelp(io.Out, v)
	return ExitOK
}

// PrintVerbHelp writes v's help: usage, text, flags and example.
func PrintVerbHelp(w io.Writer, v *Verb) {
	fmt.Fprintf(w, "usage: lockstep %s\n\n%s\n", v.Usage, v.Short)
	if v.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(v.Long))
	}
	fs := flag.NewFlagSet(v.Name, flag.ContinueOnError)
	v.Flags(fs)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
	if v.Example != "" {
		fmt.Fprintf(w, "\nExample:\n%s\n", indent(strings.TrimSpace(v.Example), "  "))
	}
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}
