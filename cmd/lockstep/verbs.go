package main

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

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

// stdio carries the streams and terminal facts a verb may use; tests fill it
// with buffers.
type stdio struct {
	in       io.Reader
	out, err io.Writer
	// errTTY is true when stderr is a terminal: progress is shown then, or
	// with -v.
	errTTY  bool
	verbose bool
}

func newStdio() *stdio {
	return &stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr, errTTY: term.IsTerminal(int(os.Stderr.Fd()))}
}

// verb is one subcommand: its help text, its flags and its run function.
type verb struct {
	Name    string
	Usage   string // e.g. "run --config <file>… [--base-dir <dir>] -- <cmd>…"
	Short   string // one line for the verb list
	Long    string // paragraphs for `lockstep help <verb>`
	Example string // "# comment\n$ lockstep …" lines
	// Flags declares the verb's flags on fs and returns the function that
	// runs it with the remaining arguments.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int
	// Hidden verbs are left out of the list and the docs.
	Hidden bool
}

var verbs = map[string]*verb{}

// register adds a verb; each verb lives in its own file and registers in init.
func register(v *verb) {
	if _, dup := verbs[v.Name]; dup {
		panic("lockstep: verb registered twice: " + v.Name)
	}
	verbs[v.Name] = v
}

func sortedVerbs() []*verb {
	var vs []*verb
	for _, v := range verbs {
		if !v.Hidden {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name < vs[j].Name })
	return vs
}

// errUsage marks an error as a usage error: exit 2 with the usage line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func run(ctx context.Context, args []string, io *stdio) int {
	var global []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		global = append(global, args[0])
		args = args[1:]
	}
	for _, g := range global {
		switch g {
		case "-v", "--verbose":
			io.verbose = true
		case "-h", "--help", "-help":
			printTopHelp(io.out)
			return exitOK
		case "--version", "-version":
			return printVersion(io, false)
		default:
			fmt.Fprintf(io.err, "lockstep: unknown option %s\nRun 'lockstep help' for the verbs.\n", g)
			return exitUsage
		}
	}
	if len(args) == 0 {
		printTopHelp(io.err)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	if name == "help" {
		return helpVerb(io, rest)
	}
	v, ok := verbs[name]
	if !ok {
		fmt.Fprintf(io.err, "lockstep: unknown verb %q\nRun 'lockstep help' for the verbs.\n", name)
		return exitUsage
	}
	return runVerb(ctx, v, io, rest)
}

func runVerb(ctx context.Context, v *verb, io *stdio, args []string) int {
	fs := flag.NewFlagSet(v.Name, flag.ContinueOnError)
	fs.SetOutput(io.err)
	fs.BoolVar(&io.verbose, "v", io.verbose, "verbose: progress and every external command on stderr")
	fs.Usage = func() {}
	runFn := v.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printVerbHelp(io.out, v)
			return exitOK
		}
		return usageExit(io, v, err)
	}
	return runFn(ctx, io, fs.Args())
}

func usageExit(io *stdio, v *verb, err error) int {
	fmt.Fprintf(io.err, "lockstep %s: %v\nusage: lockstep %s\nRun 'lockstep help %s' for details.\n", v.Name, err, v.Usage, v.Name)
	return exitUsage
}

// fail prints a verb's error as one line and returns code.
func fail(io *stdio, v string, code int, err error) int {
	fmt.Fprintf(io.err, "lockstep %s: %v\n", v, err)
	return code
}

func printTopHelp(w io.Writer) {
	fmt.Fprintln(w, "lockstep: Landlock policies on pinned kernels in throwaway QEMU guests, checked against audit records.")
	fmt.Fprintln(w, "\nUsage: lockstep [-v] <verb> [flags] [args]\n       lockstep --version\n\nVerbs:")
	for _, v := range sortedVerbs() {
		fmt.Fprintf(w, "  %-12s %s\n", v.Name, v.Short)
	}
	fmt.Fprintln(w, "\nRun 'lockstep help <verb>' or 'lockstep <verb> --help' for a verb's flags and an example.")
}

func helpVerb(io *stdio, args []string) int {
	if len(args) == 0 {
		printTopHelp(io.out)
		return exitOK
	}
	v, ok := verbs[args[0]]
	if !ok {
		fmt.Fprintf(io.err, "lockstep help: unknown verb %q\n", args[0])
		return exitUsage
	}
	printVerbHelp(io.out, v)
	return exitOK
}

func printVerbHelp(w io.Writer, v *verb) {
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

// multiFlag collects a repeatable string flag (--config A --config B).
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// writeReport renders an HTML report and writes it atomically to path; an
// empty path (no --html) writes nothing.
func writeReport(path string, render func() ([]byte, error)) error {
	if path == "" {
		return nil
	}
	page, err := render()
	if err == nil {
		err = safefile.WriteFile(path, page, 0o644)
	}
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	return nil
}

// checkAccel refuses an --accel value that names no accelerator.
func checkAccel(accel string) error {
	switch accel {
	case harness.AccelAuto, harness.AccelKVM, harness.AccelTCG:
		return nil
	}
	return usagef("--accel %q: want auto, kvm or tcg", accel)
}

// maxTCGTimeFactor bounds --tcg-time-factor: a bigger factor only hides a
// run that hangs.
const maxTCGTimeFactor = 100

// tcgTimeFactorFlag is --tcg-time-factor of the verbs that time exercise
// runs in guests (observe, verify).
func tcgTimeFactorFlag(fs *flag.FlagSet) *int {
	return fs.Int("tcg-time-factor", engine.DefaultTCGTimeFactor,
		"under TCG, multiply the exercise runs' timeout and cpu limits by `N` (1 keeps the policy's; not the containment checks')")
}

// checkGuestFlags checks --accel and --tcg-time-factor of a verb that
// boots guests to time exercise runs.
func checkGuestFlags(accel string, tcgFactor int) error {
	if err := checkAccel(accel); err != nil {
		return err
	}
	if tcgFactor < 1 || tcgFactor > maxTCGTimeFactor {
		return usagef("--tcg-time-factor %d: want 1 to %d", tcgFactor, maxTCGTimeFactor)
	}
	return nil
}

// timeFactorNote is sep and engine.FactorNote for a factor above 1, else "".
func timeFactorNote(sep string, factor int) string {
	if n := engine.FactorNote(factor); n != "" {
		return sep + n
	}
	return ""
}

// inGuestOut is where an --in-guest side writes: --out, else, in a guest,
// the results directory that comes back to the host.
func inGuestOut(out string) (string, error) {
	if out != "" {
		return out, nil
	}
	if os.Getenv(proto.EnvGuest) != "1" {
		return "", usagef("--in-guest outside a guest needs --out")
	}
	return proto.ResultsDir, nil
}
