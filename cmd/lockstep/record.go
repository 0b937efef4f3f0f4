package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/recorder"
)

// recordSubs are record's sub-verbs.
const recordSubs = "run, generate, check, diff"

// recordLong is record's help text.
const recordLong = `The recorded program runs UNSANDBOXED (inside a throwaway guest, so the host is
not exposed: the guest's root is this machine's, read-only, under an overlay that
dies with the guest). Record only programs you would run yourself.

A recording lives in D/N (default ./recordings/N): one directory per session
under sessions/, and policy.cfg and record.json once generated.

  run       boot a fresh guest, copy --exercise into /var/tmp/testing-dir,
            list the starting state (a digest and a list), run the command
            under strace with no sandbox on a pseudo-terminal driven by
            --script, and add the session (trace, transcript, session.json)
            to the recording. Without --script the session is typed by
            hand: this terminal goes raw and is passed through (^C reaches
            the program, the window size follows) until the program exits.
            --sample measures the session's process tree for generate
            --limits (add --memory-pinned to derive mem_mb, or
            --address-space-unbounded to switch it off for a sanitizer's
            or a JVM's reservation). A script line that does not finish (an expect
            that times out) fails the session, naming the line: status 1.
  generate  turn every session into policy.cfg and record.json with the layer
            pruner's own generalisation (docs/record.md lists the rules).
            Status 4: a [read] or [execute] row names a path no session
            found before it ran; 5: lockstep policy check refuses the
            result; 6: a call could not be mapped or no policy can grant
            it (the header says INCOMPLETE).
  check     replay --script in a fresh guest on the pinned kernel (default
            7.2.13) under policy.cfg with the audit observer: status 1 on
            each call that succeeded while recording and is now refused,
            named with its object, right and the kernel's audit record, and
            on a replay that did not run the script to its end.
  diff      compare --policy with what the sessions used: what it lacks,
            and what it grants that no session used (a row an ancestor
            already covers is marked so, never called unused). Status 1
            when it lacks something.

A script has one step a line: send TEXT (written as it stands, no newline),
key NAME (enter, tab, ctrl-c, ctrl-d, up, down, esc), expect REGEX [SECONDS]
(default 30), idle SECONDS (until the program has been quiet that long),
sleep SECONDS; # starts a comment. See docs/record.md.

run and check print a progress line per stage of the guest's boot on stderr
("lockstep record [<elapsed>] …", one line that rewrites itself where stderr
is a terminal); -q leaves only warnings and the result.

Exit status: 0 ok; 1 failed (see above); 2 usage; 3 indeterminate (the
guest did not report); 4, 5, 6 generate's (above); 70 the guest could not be
set up.`

func init() {
	guestRole(recorder.GuestRole, "record", recordHere)
	guestRole(recorder.CheckRole, "record", recordCheckHere)
	register(&verb{
		Name:  "record",
		Usage: "record {run|generate|check|diff} --name N [--dir D] [flags] [-- cmd…]",
		Short: "the recording pruner: record a program's sessions unsandboxed in a guest, turn them into a policy, check it",
		Long:  recordLong,
		Example: `# The recorded program runs unsandboxed, inside a throwaway guest.
# Record a Python REPL session, generate its policy, check it on 7.2.13
$ lockstep record run --name repl --exercise recorder/testdata/repl/exercise --script recorder/testdata/repl/session.script -- python3 -q
$ lockstep record generate --name repl
$ lockstep record check --name repl --script recorder/testdata/repl/session.script -- python3 -q
# What a hand-written base lacks for the sessions, and what it grants unused
$ lockstep record diff --name repl --policy base.cfg`,
		Flags: recordFlags,
	})
}

// recordArgs are record's flags (each sub-verb reads those it needs).
type recordArgs struct {
	fs                                      *flag.FlagSet
	name, dir, exercise, script, kernelA    *string
	policyFile, root, accel                 *string
	cpus, mem                               *int
	asJSON, quiet                           *bool
	sample, limits, memoryPinned, unbounded *bool
}

func recordFlags(fs *flag.FlagSet) func(ctx context.Context, io *stdio, args []string) int {
	a := &recordArgs{fs: fs}
	a.name = fs.String("name", "", "the recording's `name` (required)")
	a.dir = fs.String("dir", "recordings", "`dir`ectory holding the recordings")
	a.exercise = fs.String("exercise", "", "run, check: `dir`ectory copied into /var/tmp/testing-dir first")
	a.script = fs.String("script", "", "run, check: the session's script `file`")
	a.kernelA = fs.String("kernel", kernel.DefaultPin, "run, check: kernel `pin` or bzImage file")
	pinsFlag(fs)
	a.policyFile = fs.String("policy", "", "check, diff: the policy `file` (default: the generated policy.cfg)")
	a.root = fs.String("root", "", "run, check: host `dir`ectory exported read-only as the guest's root (default /)")
	a.accel = fs.String("accel", harness.AccelAuto, "run, check: accelerator: `auto`, kvm or tcg")
	cpuFlag(fs)
	a.cpus = fs.Int("cpus", 1, "run, check: guest vCPUs")
	a.mem = fs.Int("mem", 1024, "run, check: guest memory in `MiB`")
	a.asJSON = fs.Bool("json", false, "print the result as one JSON document")
	a.sample = fs.Bool("sample", false, "run: sample the session's process tree for limits (10 Hz, as the layer pruner does)")
	a.limits = fs.Bool("limits", false, "generate: derive [limits] from the sessions' samples (each recorded with --sample)")
	a.memoryPinned = fs.Bool("memory-pinned", false, "generate: with --limits, derive mem_mb too: the program's memory is pinned (a fixed heap), as an exercise's heap_pinned")
	a.unbounded = fs.Bool("address-space-unbounded", false, "generate: with --limits, write mem_mb=0: the program reserves far more address space than it uses (sanitizers, a JVM), as an exercise's address_space_unbounded")
	a.quiet = fs.Bool("q", false, "run, check: quiet: no progress lines (a line per stage of the guest's boot), only warnings and the result")
	return a.run
}

func (a *recordArgs) run(ctx context.Context, io *stdio, args []string) int {
	v := verbs["record"]
	if len(args) == 0 {
		return usageExit(io, v, usagef("no sub-verb; want one of %s", recordSubs))
	}
	sub := args[0]
	if err := a.fs.Parse(args[1:]); err != nil {
		return usageExit(io, v, err)
	}
	if *a.name == "" || filepath.Base(*a.name) != *a.name || *a.name == "." || *a.name == ".." {
		return usageExit(io, v, usagef("--name: want a plain name (no /), got %q", *a.name))
	}
	if err := checkAccel(*a.accel); err != nil {
		return usageExit(io, v, err)
	}
	rest := a.fs.Args()
	switch sub {
	case "run":
		return a.recordRun(ctx, io, rest)
	case "generate":
		if len(rest) > 0 {
			return usageExit(io, v, usagef("record generate takes no command, got %q", rest))
		}
		return a.recordGenerate(io)
	case "check":
		return a.recordCheck(ctx, io, rest)
	case "diff":
		if len(rest) > 0 {
			return usageExit(io, v, usagef("record diff takes no command, got %q", rest))
		}
		return a.recordDiff(io)
	}
	return usageExit(io, v, usagef("unknown sub-verb %q; want one of %s", sub, recordSubs))
}

func (a *recordArgs) recording() string { return filepath.Join(*a.dir, *a.name) }

func (a *recordArgs) sizing() harness.Sizing {
	return harness.Sizing{Root: *a.root, Accel: *a.accel, CPUs: *a.cpus, MemMB: *a.mem}
}

// readScript reads --script, which check requires; run without it is an
// interactive session ("").
func (a *recordArgs) readScript(required bool) (string, error) {
	if *a.script == "" {
		if required {
			return "", usagef("--script is required: check replays a scripted session")
		}
		return "", nil
	}
	b, err := safefile.ReadFile(*a.script, 1<<20)
	if err != nil {
		return "", usagef("--script: %v", err)
	}
	return string(b), nil
}

func (a *recordArgs) recordRun(ctx context.Context, io *stdio, cmd []string) int {
	g, code := a.guestSession(ctx, io, cmd, false)
	if g == nil {
		return code
	}
	defer g.end()
	io = g.io
	g.log.Info("booting a guest to record the session (the program runs unsandboxed there)")
	opts := recorder.RunOptions{Recording: a.recording(), Exercise: *a.exercise, Script: g.script, Command: cmd, Kernel: g.kernel,
		Sizing: a.sizing(), Verbose: io.verbose, Log: g.log, Sample: *a.sample}
	if io.verbose {
		opts.Stderr = io.err
	}
	if g.script == "" {
		if opts.Terminal, code = interactive(io); opts.Terminal == nil {
			return code
		}
	}
	res, err := recorder.Run(ctx, opts)
	if err != nil {
		return fail(io, "record", exitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "record", res, res.Status, exitIndeterminate)
	}
	switch res.Status {
	case recorder.StatusOK:
		fmt.Fprintf(io.out, "recorded %s: status %d, %s used, %.1f s (the program ran unsandboxed, in the guest)\n",
			res.Session, res.Record.Status, plural(len(res.Record.Uses), "call"), res.Record.Seconds)
	default:
		if res.Session != "" {
			fmt.Fprintf(io.out, "kept %s (failed)\n", res.Session)
		}
		fmt.Fprintf(io.err, "lockstep record: %s\n", res.Reason)
	}
	return res.Status
}

// interactive is run's session without a script: the user's terminal
// passed through. Progress lines stop here (the terminal is raw from now
// on); the one line printed says what happens.
func interactive(io *stdio) (*recorder.Passthrough, int) {
	in, ok := io.in.(*os.File)
	if !ok {
		return nil, fail(io, "record", exitUsage, errors.New("an interactive session needs standard input to be a file or terminal; give --script"))
	}
	fmt.Fprintf(io.err, "lockstep record: interactive session: the program runs UNSANDBOXED in the guest once it boots; "+
		"everything typed goes to it (^C too); the session ends when it exits\n")
	return &recorder.Passthrough{In: in, Out: io.out}, exitOK
}

// recordHere is run's guest side (recorder.GuestRole).
func recordHere(ctx context.Context, io *stdio, opts recorder.GuestOptions) int {
	rec, err := recorder.RecordHere(ctx, opts)
	if err != nil {
		return fail(io, "record", exitIndeterminate, err)
	}
	fmt.Fprintf(io.err, "record: session status %d, %s %s\n", rec.Status, plural(len(rec.Uses), "use"), rec.ScriptError)
	return exitOK
}

func (a *recordArgs) recordGenerate(io *stdio) int {
	g, err := recorder.Generate(a.recording(), recorder.GenerateOptions{Limits: *a.limits, MemoryPinned: *a.memoryPinned, AddressSpaceUnbounded: *a.unbounded})
	if err != nil {
		return fail(io, "record", exitUsage, err)
	}
	r := g.Record
	if *a.asJSON {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintf(io.out, "%s\n", b)
		return r.Status
	}
	fmt.Fprintf(io.out, "%s: %s from %s, %s (the recorded program ran unsandboxed, in the guest)\n",
		filepath.Join(a.recording(), recorder.PolicyFile), plural(len(r.Grants), "row"), plural(len(r.Sessions), "session"), r.PolicyHash)
	for _, w := range r.Why {
		fmt.Fprintf(io.err, "lockstep record: %s\n", w)
	}
	return r.Status
}

func (a *recordArgs) recordDiff(io *stdio) int {
	file := *a.policyFile
	if file == "" {
		file = filepath.Join(a.recording(), recorder.PolicyFile)
	}
	d, err := recorder.Diff(a.recording(), file)
	if err != nil {
		return fail(io, "record", exitUsage, err)
	}
	code := exitOK
	if len(d.Lacks) > 0 {
		code = exitFail
	}
	if *a.asJSON {
		b, _ := json.MarshalIndent(d, "", "  ")
		fmt.Fprintf(io.out, "%s\n", b)
		return code
	}
	for _, l := range d.Lacks {
		fmt.Fprintf(io.out, "lacks   %s\n", l)
	}
	for _, u := range d.Unused {
		fmt.Fprintf(io.out, "unused  %s\n", u)
	}
	for _, c := range d.Covered {
		fmt.Fprintf(io.out, "covered %s\n", c)
	}
	fmt.Fprintf(io.out, "%s: %d lacking, %d unused, %d covered by an ancestor\n", file, len(d.Lacks), len(d.Unused), len(d.Covered))
	return code
}

func (a *recordArgs) recordCheck(ctx context.Context, io *stdio, cmd []string) int {
	g, code := a.guestSession(ctx, io, cmd, true)
	if g == nil {
		return code
	}
	defer g.end()
	io = g.io
	g.log.Info("booting a guest to replay the script under the policy")
	opts := recorder.CheckOptions{PolicyFile: *a.policyFile, RunOptions: recorder.RunOptions{Recording: a.recording(), Exercise: *a.exercise,
		Script: g.script, Command: cmd, Kernel: g.kernel, Sizing: a.sizing(), Verbose: io.verbose, Log: g.log}}
	if io.verbose {
		opts.Stderr = io.err
	}
	res, _, err := recorder.Check(ctx, opts)
	if err != nil {
		if errors.Is(err, harness.ErrGuestSetup) {
			return fail(io, "record", exitGuestSetup, err)
		}
		return fail(io, "record", exitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "record", res, res.Status, exitIndeterminate)
	}
	printCheck(io, res)
	return res.Status
}

// recordGuest is what record run and record check share before a guest
// boots: the checked command's script, the progress display (end closes
// it) and the kernel.
type recordGuest struct {
	io     *stdio
	end    func()
	log    *slog.Logger
	script string
	kernel string
}

// guestSession checks cmd, reads --script, opens the progress display and
// resolves the kernel; on failure it returns nil and the exit status.
func (a *recordArgs) guestSession(ctx context.Context, io *stdio, cmd []string, needScript bool) (*recordGuest, int) {
	v := verbs["record"]
	if err := recorder.CheckCommand(cmd); err != nil {
		return nil, usageExit(io, v, err)
	}
	script, err := a.readScript(needScript)
	if err != nil {
		return nil, usageExit(io, v, err)
	}
	pio, end := withProgressDisplay(io, "record")
	// An interactive session's terminal is raw: no progress lines.
	log := progressLogger(pio, "record", *a.quiet || script == "")
	bz, err := resolveKernel(ctx, *a.kernelA, log)
	if err != nil {
		code := fail(pio, "record", exitIndeterminate, err)
		end()
		return nil, code
	}
	return &recordGuest{io: pio, end: end, log: log, script: script, kernel: bz}, exitOK
}

func printCheck(io *stdio, res *recorder.CheckResult) {
	for _, r := range res.Regressions {
		fmt.Fprintf(io.out, "refused %s %s (%s)\n  line: %s\n", r.Call, strings.Join(r.Objects, " "), strings.Join(r.Rights, ","), r.Line)
		for _, a := range r.Audit {
			fmt.Fprintf(io.out, "  kernel record: %s\n", a)
		}
	}
	for _, u := range res.Unchecked {
		fmt.Fprintf(io.out, "not checked: %s\n", u)
	}
	for _, w := range res.Why {
		fmt.Fprintf(io.err, "lockstep record: %s\n", w)
	}
	if res.Status == recorder.StatusOK {
		fmt.Fprintf(io.out, "check passed: the session ran to its end under the policy, no recorded call refused\n")
	}
}

// recordCheckHere is check's guest side (recorder.CheckRole).
func recordCheckHere(ctx context.Context, io *stdio, opts recorder.CheckGuestOptions) int {
	res, err := recorder.CheckHere(ctx, opts)
	if err != nil {
		return fail(io, "record", exitIndeterminate, err)
	}
	fmt.Fprintf(io.err, "record check: status %d, %s\n", res.Status, plural(len(res.Regressions), "regression"))
	return exitOK
}
