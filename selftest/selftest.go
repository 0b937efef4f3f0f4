package selftest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/observer/proof"
)

// GuestRole is the registered role (proto.EnvRole) of the selftest's guest
// side: the job of the guest Host boots, reading its GuestOptions from the
// job (proto.OptionsFile).
const GuestRole = "selftest-guest"

// Files the guest side writes into its Out.
const (
	// ReportFile is the proof's report (proof.Report, as JSON).
	ReportFile = "selftest.json"
	// RecordsFile holds every audit record the proof read, netlink form.
	RecordsFile = "selftest-records.txt"
)

// GuestOptions configures Guest; as JSON it is the job the host side hands
// the guest.
type GuestOptions struct {
	// WantRelease is what uname -r must say (empty: not checked); WantABI
	// the pin's Landlock ABI.
	WantRelease string `json:"want_release,omitempty"`
	WantABI     int    `json:"want_abi"`
	// Out receives ReportFile and RecordsFile; "" keeps neither.
	Out string `json:"out,omitempty"`
	// Log receives progress; nil discards it.
	Log *slog.Logger `json:"-"`
}

// Guest proves the running kernel (proof.Run) and, when Out is set, writes
// the report and the records there.
func Guest(ctx context.Context, opts GuestOptions) (*proof.Report, error) {
	popts := proof.Options{WantRelease: opts.WantRelease, WantABI: opts.WantABI, Log: opts.Log}
	if opts.Out == "" {
		return proof.Run(ctx, popts)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	raw, err := os.Create(filepath.Join(opts.Out, RecordsFile))
	if err != nil {
		return nil, err
	}
	popts.Raw = raw
	rep, err := proof.Run(ctx, popts)
	if cerr := raw.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	return rep, safefile.WriteFile(filepath.Join(opts.Out, ReportFile), append(b, '\n'), 0o644)
}

// HostOptions configures Host.
type HostOptions struct {
	// Kernel is the bzImage to boot; WantRelease the release its header
	// names and WantABI the pin's Landlock ABI.
	Kernel      string
	WantRelease string
	WantABI     int
	// Machine is QEMU's machine type and Modules the modules a
	// distribution kernel's guest loads (harness.Options).
	Machine string
	Modules []string
	// Results keeps the guest's ReportFile, RecordsFile and run.json; ""
	// is a temporary directory, removed afterwards.
	Results string
	// Sizing is the guest's.
	harness.Sizing
	// Stdout receives the guest's console (nil: the report is read from
	// the results, not the console), Stderr the harness's progress.
	Stdout, Stderr io.Writer
	Verbose        bool
	Log            *slog.Logger
}

// HostResult is what Host found.
type HostResult struct {
	Report *proof.Report
	Run    *harness.Result
}

// Host boots the kernel with the selftest's guest side (GuestRole) as the
// job and reads the report it wrote. On an error the result is nil when no
// guest booted (harness.Run's error as it is), else it holds the run and the
// error wraps harness's (harness.ErrGuestSetup: it could not be set up).
func Host(ctx context.Context, opts HostOptions) (*HostResult, error) {
	dir := opts.Results
	if dir == "" {
		tmp, err := os.MkdirTemp("", "lockstep-selftest.")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	hopts := harness.Options{Kernel: opts.Kernel, Machine: opts.Machine, Modules: opts.Modules, ResultsDir: dir,
		Stdout: opts.Stdout, Stderr: opts.Stderr, Verbose: opts.Verbose, Log: opts.Log}
	opts.Sizing.Apply(&hopts)
	err := hopts.SetRole(GuestRole, GuestOptions{WantRelease: opts.WantRelease, WantABI: opts.WantABI, Out: proto.ResultsDir})
	if err != nil {
		return nil, err
	}
	run, err := harness.Run(ctx, hopts)
	if run == nil {
		return nil, err
	}
	if err != nil {
		return &HostResult{Run: run}, fmt.Errorf("guest on %s: %w", filepath.Base(opts.Kernel), err)
	}
	rep, err := readReport(dir, run.Status)
	if err != nil {
		return nil, err
	}
	return &HostResult{Report: rep, Run: run}, nil
}

// readReport reads the report the guest wrote into dir, which must be a
// report of this schema whose status is the one the guest exited with.
func readReport(dir string, status int) (*proof.Report, error) {
	data, err := safefile.ReadFile(filepath.Join(dir, ReportFile), 0)
	if err != nil {
		return nil, fmt.Errorf("the guest wrote no report (status %d): %w", status, err)
	}
	var rep proof.Report
	if err := json.Unmarshal(data, &rep); err != nil || rep.Schema != proof.Schema {
		return nil, fmt.Errorf("the guest's %s is not a schema-%d report: %v", ReportFile, proof.Schema, err)
	}
	if rep.Status != status {
		return nil, fmt.Errorf("the guest exited %d but its report says status %d", status, rep.Status)
	}
	return &rep, nil
}
