package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/internal/version"
)

// Run boots one throwaway guest, runs o.Command in it and returns what came
// back. The returned error is nil when the command's status is
// trustworthy (whatever its value); with a Result it wraps ErrIndeterminate
// (status 3), ErrGuestSetup (status 70) or the context's error; without one
// nothing was booted (bad options, no QEMU, KVM asked for but unusable).
//
// No QEMU process and no temporary directory outlives Run, on any path.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.setDefaults()
	qv, err := QEMUVersion(o.QEMU)
	if err != nil {
		return nil, fmt.Errorf("%w: %w (install qemu-system-x86, or name the binary in LOCKSTEP_QEMU)", ErrNoQEMU, err)
	}
	accel, cpu, accelReason, err := resolveAccel(ctx, &o)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Status: proto.StatusIndeterminate, Accel: accel, AccelReason: accelReason, CPU: cpu, Machine: o.Machine,
		CPUs: o.CPUs, MemMB: o.MemMB, QEMUVersion: qv, Lockstep: version.String(), JobID: newID(), KernelSHA256: fileSHA256(o.Kernel),
	}
	res.Timings.Accel = time.Since(start)
	defer func() { res.Timings.Total = time.Since(start) }()

	dir, err := os.MkdirTemp("", "lockstep-guest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	job, shares, disks := guestJob(&o, res.JobID, accel)
	initrd := filepath.Join(dir, "initramfs")
	if err := buildInitramfs(ctx, &o, job, initrd, res); err != nil {
		return nil, err
	}
	chs, err := listenChannels(&o, dir)
	if err != nil {
		return nil, err
	}
	defer chs.close()
	cfg := QEMUConfig{
		Binary: o.QEMU, Name: "lockstep-" + res.JobID, Machine: o.Machine, Accel: accel, CPU: cpu,
		MemMB: o.MemMB, CPUs: o.CPUs, Kernel: o.Kernel, Initramfs: initrd,
		Append:     kernelCmdline(res.JobID, o.Verbose, o.TestHook, append(accelKernelArgs(accel), o.KernelArgs...)...),
		ConsoleLog: filepath.Join(dir, "console.log"), QMPSocket: filepath.Join(dir, "qmp.sock"),
		Shares: shares, Disks: disks,
		Ports: chs.ports,
		RNG:   true,
	}
	argv, err := qemuArgv(cfg, &o, res)
	if err != nil {
		return nil, err
	}

	g := &guestRun{o: &o, res: res, log: o.Log, argv: argv, consolePath: cfg.ConsoleLog, qmpPath: cfg.QMPSocket, evL: chs.evL, resL: chs.resL,
		inL: chs.inL, deadlines: o.deadlines(accel)}
	err = g.boot(ctx)
	res.Timings.Total = time.Since(start)
	saveOutputs(&o, res, cfg.ConsoleLog)
	return res, err
}

// saveOutputs keeps what a run leaves for its caller: run.json and the
// console.
func saveOutputs(o *Options, res *Result, console string) {
	saveRunJSON(o, res)
	saveConsole(o, console)
}

// saveConsole copies the console log to o.ConsoleFile, if one is asked
// for; a failure is only warned about, as the run's outcome stands without
// it.
func saveConsole(o *Options, console string) {
	if o.ConsoleFile == "" {
		return
	}
	b, err := os.ReadFile(console)
	if err == nil {
		err = safefile.WriteFile(o.ConsoleFile, b, 0o644)
	}
	if err != nil {
		o.Log.Warn("cannot keep the console log", "file", o.ConsoleFile, "err", err)
	}
}

// saveRunJSON writes run.json into o.ResultsDir, if there is one; a failure
// is only warned about, as the run's outcome stands without it.
func saveRunJSON(o *Options, res *Result) {
	if o.ResultsDir == "" {
		return
	}
	if err := writeRunJSON(o.ResultsDir, res); err != nil {
		o.Log.Warn("cannot write run.json", "err", err)
	}
}

// RunJSONSchema is the schema version of run.json.
const RunJSONSchema = 1

func writeRunJSON(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	doc := struct {
		Schema int `json:"schema"`
		*Result
	}{RunJSONSchema, res}
	b, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return err
	}
	// Atomic: a full disk leaves no run.json rather than a truncated one.
	return safefile.WriteFile(filepath.Join(dir, "run.json"), append(b, '\n'), 0o644)
}
