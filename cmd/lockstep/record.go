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

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/harness/guestkernel"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/kernel"
	"github.com/lockstep-sandbox/lockstep/recorder"
)

// recordSubs are record's sub-verbs.
const recordSubs = "run, generate, check, diff"

func init() {
	guestRole(recorder.GuestRole, "record", recordHere)
	guestRole(recorder.CheckRole, "record", recordCheckHere)
	verbs.Register(&cli.Verb{
		Name:    "record",
		Usage:   "record {run|generate|check|diff} --name N [--dir D] [flags] [-- cmd…]",
		Short:   "the recording pruner: record a program's sessions unsandboxed in a guest, turn them into a policy, check it",
		Long:    help("record", nil),
		Example: example("record"),
		Flags:   recordFlags,
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

func recordFlags(fs *flag.FlagSet) func(ctx context.Context, io *cli.Stdio, args []string) int {
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

func (a *recordArgs) run(ctx context.Context, io *cli.Stdio, args []string) int {
	v := verbs["record"]
	if len(args) == 0 {
		return cli.UsageExit(io, v, cli.Usagef("no sub-verb; want one of %s", recordSubs))
	}
	sub := args[0]
	if err := a.fs.Parse(args[1:]); err != nil {
		return cli.UsageExit(io, v, err)
	}
	if *a.name == "" || filepath.Base(*a.name) != *a.name || *a.name == "." || *a.name == ".." {
		return cli.UsageExit(io, v, cli.Usagef("--name: want a plain name (no /), got %q", *a.name))
	}
	if err := checkAccel(*a.accel); err != nil {
		return cli.UsageExit(io, v, err)
	}
	rest := a.fs.Args()
	switch sub {
	case "run":
		return a.recordRun(ctx, io, rest)
	case "generate":
		if len(rest) > 0 {
			return cli.UsageExit(io, v, cli.Usagef("record generate takes no command, got %q", rest))
		}
		return a.recordGenerate(io)
	case "check":
		return a.recordCheck(ctx, io, rest)
	case "diff":
		if len(rest) > 0 {
			return cli.UsageExit(io, v, cli.Usagef("record diff takes no command, got %q", rest))
		}
		return a.recordDiff(io)
	}
	return cli.UsageExit(io, v, cli.Usagef("unknown sub-verb %q; want one of %s", sub, recordSubs))
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
			return "", cli.Usagef("--script is required: check replays a scripted session")
		}
		return "", nil
	}
	b, err := safefile.ReadFile(*a.script, 1<<20)
	if err != nil {
		return "", cli.Usagef("--script: %v", err)
	}
	return string(b), nil
}

func (a *recordArgs) recordRun(ctx context.Context, io *cli.Stdio, cmd []string) int {
	g, code := a.guestSession(ctx, io, cmd, false)
	if g == nil {
		return code
	}
	defer g.end()
	io = g.io
	g.log.Info("booting a guest to record the session (the program runs unsandboxed there)")
	opts := recorder.RunOptions{Recording: a.recording(), Exercise: *a.exercise, Script: g.script, Command: cmd, Kernel: g.kernel,
		Sizing: a.sizing(), Verbose: io.Verbose, Log: g.log, Sample: *a.sample}
	if io.Verbose {
		opts.Stderr = io.Err
	}
	if g.script == "" {
		if opts.Terminal, code = interactive(io); opts.Terminal == nil {
			return code
		}
	}
	res, err := recorder.Run(ctx, opts)
	if err != nil {
		return cli.Fail(io, "record", cli.ExitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "record", res, res.Status, cli.ExitIndeterminate)
	}
	res.WriteText(io.Out, io.Err)
	return res.Status
}

// interactive is run's session without a script: the user's terminal
// passed through. Progress lines stop here (the terminal is raw from now
// on); the one line printed says what happens.
func interactive(io *cli.Stdio) (*recorder.Passthrough, int) {
	in, ok := io.In.(*os.File)
	if !ok {
		return nil, cli.Fail(io, "record", cli.ExitUsage, errors.New("an interactive session needs standard input to be a file or terminal; give --script"))
	}
	fmt.Fprintf(io.Err, "lockstep record: interactive session: the program runs UNSANDBOXED in the guest once it boots; "+
		"everything typed goes to it (^C too); the session ends when it exits\n")
	return &recorder.Passthrough{In: in, Out: io.Out}, cli.ExitOK
}

// recordHere is run's guest side (recorder.GuestRole).
func recordHere(ctx context.Context, io *cli.Stdio, opts recorder.GuestOptions) int {
	rec, err := recorder.RecordHere(ctx, opts)
	if err != nil {
		return cli.Fail(io, "record", cli.ExitIndeterminate, err)
	}
	fmt.Fprintf(io.Err, "record: session status %d, %s %s\n", rec.Status, cli.Plural(len(rec.Uses), "use"), rec.ScriptError)
	return cli.ExitOK
}

func (a *recordArgs) recordGenerate(io *cli.Stdio) int {
	g, err := recorder.Generate(a.recording(), recorder.GenerateOptions{Limits: *a.limits, MemoryPinned: *a.memoryPinned, AddressSpaceUnbounded: *a.unbounded})
	if err != nil {
		return cli.Fail(io, "record", cli.ExitUsage, err)
	}
	r := g.Record
	if *a.asJSON {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintf(io.Out, "%s\n", b)
		return r.Status
	}
	g.WriteText(io.Out, io.Err, filepath.Join(a.recording(), recorder.PolicyFile))
	return r.Status
}

func (a *recordArgs) recordDiff(io *cli.Stdio) int {
	file := *a.policyFile
	if file == "" {
		file = filepath.Join(a.recording(), recorder.PolicyFile)
	}
	d, err := recorder.Diff(a.recording(), file)
	if err != nil {
		return cli.Fail(io, "record", cli.ExitUsage, err)
	}
	code := cli.ExitOK
	if len(d.Lacks) > 0 {
		code = cli.ExitFail
	}
	if *a.asJSON {
		b, _ := json.MarshalIndent(d, "", "  ")
		fmt.Fprintf(io.Out, "%s\n", b)
		return code
	}
	d.WriteText(io.Out, file)
	return code
}

func (a *recordArgs) recordCheck(ctx context.Context, io *cli.Stdio, cmd []string) int {
	g, code := a.guestSession(ctx, io, cmd, true)
	if g == nil {
		return code
	}
	defer g.end()
	io = g.io
	g.log.Info("booting a guest to replay the script under the policy")
	opts := recorder.CheckOptions{PolicyFile: *a.policyFile, RunOptions: recorder.RunOptions{Recording: a.recording(), Exercise: *a.exercise,
		Script: g.script, Command: cmd, Kernel: g.kernel, Sizing: a.sizing(), Verbose: io.Verbose, Log: g.log}}
	if io.Verbose {
		opts.Stderr = io.Err
	}
	res, _, err := recorder.Check(ctx, opts)
	if err != nil {
		if errors.Is(err, harness.ErrGuestSetup) {
			return cli.Fail(io, "record", cli.ExitGuestSetup, err)
		}
		return cli.Fail(io, "record", cli.ExitIndeterminate, err)
	}
	if *a.asJSON {
		return writeJSON(io, "record", res, res.Status, cli.ExitIndeterminate)
	}
	res.WriteText(io.Out, io.Err)
	return res.Status
}

// recordGuest is what record run and record check share before a guest
// boots: the checked command's script, the progress display (end closes
// it) and the kernel.
type recordGuest struct {
	io     *cli.Stdio
	end    func()
	log    *slog.Logger
	script string
	kernel string
}

// guestSession checks cmd, reads --script, opens the progress display and
// resolves the kernel; on failure it returns nil and the exit status.
func (a *recordArgs) guestSession(ctx context.Context, io *cli.Stdio, cmd []string, needScript bool) (*recordGuest, int) {
	v := verbs["record"]
	if err := recorder.CheckCommand(cmd); err != nil {
		return nil, cli.UsageExit(io, v, err)
	}
	script, err := a.readScript(needScript)
	if err != nil {
		return nil, cli.UsageExit(io, v, err)
	}
	pio, end := io.WithDisplay("record")
	// An interactive session's terminal is raw: no progress lines.
	log := pio.ProgressLog("record", *a.quiet || script == "")
	bz, err := guestkernel.ResolveBuiltIn(ctx, *a.kernelA, log)
	if err != nil {
		code := cli.Fail(pio, "record", cli.ExitIndeterminate, err)
		end()
		return nil, code
	}
	return &recordGuest{io: pio, end: end, log: log, script: script, kernel: bz}, cli.ExitOK
}

// recordCheckHere is check's guest side (recorder.CheckRole).
func recordCheckHere(ctx context.Context, io *cli.Stdio, opts recorder.CheckGuestOptions) int {
	res, err := recorder.CheckHere(ctx, opts)
	if err != nil {
		return cli.Fail(io, "record", cli.ExitIndeterminate, err)
	}
	fmt.Fprintf(io.Err, "record check: status %d, %s\n", res.Status, cli.Plural(len(res.Regressions), "regression"))
	return cli.ExitOK
}
