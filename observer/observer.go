package observer

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/proof"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
	"github.com/lockstep-sandbox/lockstep/record"
)

// SummarySchema is the version of the Summary document (observe.json).
const SummarySchema = 1

// Defaults of GuestOptions.
const (
	DefaultReferenceRuns = 3
	DefaultJointRuns     = 3
	DefaultRounds        = 3
)

// SummaryFile is the observer's own account of a run, written beside the
// records; the host folds it into run.json.
const SummaryFile = "observe.json"

// Artefacts of a guest run, written by Host next to run.json in PathSets
// whatever the run's outcome: the guest's console, every audit record the
// guest's collector read (as AuditRawFile's lines: "<type> <netlink body>",
// in the order received), the booted kernel's configuration, and, when a
// guest deadline passed, the harness's forensics (vCPU registers, run
// state, console tail).
const (
	ConsoleFile      = "kvm-console.log"
	AuditRawFile     = "audit-raw.log"
	KernelConfigFile = "kernel.config"
	ForensicsFile    = harness.ForensicsFile
)

// artefactFiles are the artefacts in the order run.json names them.
var artefactFiles = []string{ConsoleFile, AuditRawFile, KernelConfigFile, ForensicsFile}

// Statuses of an observer run, as `lockstep observe` exits.
const (
	StatusVerified      = 0
	StatusFailed        = 1
	StatusIndeterminate = 3
)

// GuestRole is the registered role (proto.EnvRole) of the observer's guest
// side: the guest's job when Host boots a kernel, reading its GuestOptions
// from the job (proto.OptionsFile).
const GuestRole = "observe-guest"

// GuestOptions configures Guest, the observer inside the guest; as JSON it
// is the job Host hands the guest.
type GuestOptions struct {
	// Key selects the exercises (prune.json's key, else the family).
	Key string `json:"key"`
	// Exercises is the testing root, <root>/<family>/<exercise>.
	Exercises string `json:"exercises"`
	// PathSets holds the default prune's <key>_<ex>.cfg and .json.
	PathSets string `json:"path_sets"`
	// Out receives <key>_<ex>.abi10.json, .abi10.cfg,
	// .abi10.observed.trace.gz and observe.json. It may equal PathSets.
	Out string `json:"out"`
	// Exe is the lockstep binary the runs re-execute (`run`); "" is this
	// executable.
	Exe string `json:"exe,omitempty"`
	// WorkDir is the exercises' working directory; "" is
	// exercise.DefaultWorkDir.
	WorkDir string `json:"work_dir,omitempty"`
	// Scratch holds policies and traces; "" is a new temporary directory.
	Scratch string `json:"scratch,omitempty"`
	// WantABI is the pin's Landlock ABI (at least 10); WantRelease the
	// release uname -r must say ("" not checked).
	WantABI     int    `json:"want_abi"`
	WantRelease string `json:"want_release,omitempty"`
	// ReferenceRuns, JointRuns and Rounds: 0 means the defaults (3 each).
	ReferenceRuns int `json:"reference_runs,omitempty"`
	JointRuns     int `json:"joint_runs,omitempty"`
	Rounds        int `json:"rounds,omitempty"`
	// RunTimeout bounds each run of an exercise; 0 is the exercise
	// package's default.
	RunTimeout time.Duration `json:"run_timeout,omitempty"`
	// Wait bounds the wait for each domain's deallocation record; 0 is
	// DefaultWait.
	Wait time.Duration `json:"wait,omitempty"`
	// AuditRaw, if set, is a file that receives every audit record the
	// collector reads, one line each, as received (Host's AuditRawFile).
	AuditRaw string `json:"audit_raw,omitempty"`
	// BacklogLimit is the kernel's audit backlog limit to set; 0 is the
	// collector's default (8192). Tests lower it to provoke loss.
	BacklogLimit uint32 `json:"backlog_limit,omitempty"`
	// RootDigest is provenance.root_digest of the records: the digest of
	// the guest's root file system, taken by the host (internal/rootdigest).
	RootDigest string `json:"root_digest,omitempty"`
	// TCGTimeFactor multiplies the timeout and cpu limits of the exercise
	// runs (reference, cross-check, joint, diagnosis; not the containment
	// checks) when Accel is TCG (TimeFactor); 0 is DefaultTCGTimeFactor.
	TCGTimeFactor int `json:"tcg_time_factor,omitempty"`
	// Accel is the accelerator the guest runs under (proto.EnvAccel, set by
	// the guest's role from its environment); "" is none (the host).
	Accel string `json:"-"`
	// OneCPU runs each traced run (strace and everything it traces) on
	// one CPU: under TCG strace's wake-ups across two vCPUs slowed the
	// traced runs 2 to 3 times (pinOneCPU). The other runs use every CPU.
	OneCPU bool `json:"one_cpu,omitempty"`
	// Lanes is how many of one phase's independent runs (the reference
	// runs, a round's joint runs) run side by side, each in a lane of its
	// own (package observer/lane: its own mount and network namespace,
	// its own copy at WorkDir); 0 or 1 runs them one after another. Lanes
	// need CAP_SYS_ADMIN: the host gives the guest's observer one per
	// vCPU.
	Lanes int `json:"lanes,omitempty"`
	// Progress receives one line per step of each exercise; nil discards.
	Progress io.Writer `json:"-"`
	// Log receives debug messages; nil discards them.
	Log *slog.Logger `json:"-"`
}

// Summary is what Guest did: observe.json.
type Summary struct {
	Schema int `json:"schema"`
	// Status is StatusVerified, StatusFailed or StatusIndeterminate.
	Status int    `json:"status"`
	Reason string `json:"reason,omitempty"`
	Key    string `json:"key"`
	// Proof is the kernel proof that ran before any exercise.
	Proof *proof.Report `json:"proof,omitempty"`
	// Audit are the collector's and the kernel's counters at the end.
	Audit     AuditCounters     `json:"audit"`
	Exercises []ExerciseSummary `json:"exercises"`
	// TimeFactor is the factor the exercise runs' timeout and cpu limits
	// were multiplied by (TimeFactor; absent: 1).
	TimeFactor int `json:"time_factor,omitempty"`
	// Schedule is the schedule's event log: each step that ran beside
	// another (a lane's run, the reference runs beside the cross-check, a
	// diagnosis or containment checks beside a round's first joint run,
	// the warm-up beside the kernel proof), when it started and whether its
	// result was kept, discarded or cancelled, in order.
	Schedule []schedule.Event `json:"schedule,omitempty"`
	Seconds  float64          `json:"seconds"`
}

// AuditCounters are the audit figures of a run: records the collector read,
// the kernel's lost counter, its backlog limit and the backlog at the end.
type AuditCounters struct {
	Received     uint64 `json:"received"`
	Lost         uint32 `json:"lost"`
	LostBefore   uint32 `json:"lost_before"`
	Backlog      uint32 `json:"backlog"`
	BacklogLimit uint32 `json:"backlog_limit"`
}

// ExerciseSummary is one exercise's account beside its records.
type ExerciseSummary struct {
	Exercise string `json:"exercise"`
	Verified bool   `json:"verified"`
	// Inconclusive: a run ran out of time before anything was found, so
	// the exercise says nothing about the kernel (Reason says which run).
	Inconclusive bool `json:"inconclusive,omitempty"`
	// Reason is why it was not verified.
	Reason string `json:"reason,omitempty"`
	// Reference are the reference runs' durations in seconds.
	Reference []float64 `json:"reference_seconds"`
	// Runs counts every run of the exercise by kind.
	Runs map[string]int `json:"runs"`
	// Trace names the run whose strace log is in the .abi10.observed.trace.gz
	// and the SHA-256 of that log, uncompressed.
	Trace *TraceInfo `json:"trace,omitempty"`
	// Matched are the cross-check's matched pairs: each strace refusal that
	// found its audit record(s), with them (Refusal.Audit), in trace order.
	// The .abi10.json keeps only their count (Phobos's schema).
	Matched []engine.Refusal `json:"cross_check_matched,omitempty"`
	// Containment are evidence/contain's checks under the settled policy.
	Containment []ContainmentCheck `json:"containment,omitempty"`
	Seconds     float64            `json:"seconds"`
}

// TraceInfo describes a kept strace log.
type TraceInfo struct {
	Run    string `json:"run"`
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// ContainmentCheck is one containment check under the verified policy, as
// evidence/contain ran it.
type ContainmentCheck struct {
	Name string `json:"name"`
	// Held: the sandbox refused the probe (and its control, if any,
	// succeeded without one). Skipped: the check could not run (Detail says
	// why).
	Held    bool   `json:"held"`
	Skipped bool   `json:"skipped,omitempty"`
	Detail  string `json:"detail"`
}

// containmentChecks converts evidence/contain's record of the checks.
func containmentChecks(rs []record.ContainmentCheck) []ContainmentCheck {
	out := make([]ContainmentCheck, 0, len(rs))
	for _, r := range rs {
		c := ContainmentCheck{Name: r.Name, Held: r.Refused && r.Unchecked == "", Skipped: r.Unchecked != ""}
		switch {
		case r.Unchecked != "":
			c.Detail = r.Unchecked
		default:
			c.Detail = fmt.Sprintf("probe %s: refused %v", strings.Join(r.Arguments, " "), r.Refused)
			if r.Control != "" {
				c.Detail += "; control: " + r.Control
			}
		}
		out = append(out, c)
	}
	return out
}

// lanesFor is how many runs go side by side: at most n, as many as half of
// availMiB holds when each run's largest process peaks at rssKiB, at least
// 1 (and 1 when the peak is unknown). The other half is left to what the
// peak does not count: the runs' other processes, their copies in the
// guest's tmpfs, the page cache.
func lanesFor(n int, availMiB, rssKiB int64) int {
	if rssKiB <= 0 {
		return 1
	}
	return int(max(1, min(int64(n), availMiB*1024/2/rssKiB)))
}

// LaneStep names a run made in lane of lanes in the schedule's event log.
func LaneStep(run string, lane, lanes int) string {
	return fmt.Sprintf("%s (lane %d of %d)", run, lane, lanes)
}

// WarmUpStep names the warm-up run beside the kernel proof in the
// schedule's event log: started with the proof, discarded at its end.
const WarmUpStep = "warm-up run beside the kernel proof"
