package contain

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
	"github.com/lockstep-sandbox/lockstep/record"
)

// DefaultProbeTimeout bounds one probe run.
const DefaultProbeTimeout = 300 * time.Second

// Setup says how Execute runs the probes.
type Setup struct {
	// Probe is the probe's argv prefix, {lockstep, Verb}; Probe[0] is
	// granted read and execute on top of the policy.
	Probe []string
	// Enforcer is the argv prefix that runs a command under a policy file:
	// "--config", the file, "--" and the probe's argv are appended.
	Enforcer []string
	// Canaries are the canaries' templates, nil meaning DefaultCanaries:
	// each run plants its own file for each and removes it afterwards
	// (plant); the checks are named by the templates.
	Canaries []string
	// WorkDir is the exercise's working directory: the fsize check writes
	// there when the policy grants it [write] and [create].
	WorkDir string
	// ScratchDir receives the probe's policy files.
	ScratchDir string
	// MaxSeconds caps the timeout and cpu checks; 0 means DefaultMaxSeconds.
	MaxSeconds int
	// Env is the probe's environment; Timeout bounds one probe run (0 means
	// DefaultProbeTimeout).
	Env     []string
	Timeout time.Duration
	// Ran, when set, is called before every probe operation (to count
	// them): once for a probe of one, once per operation for a batch.
	Ran func()
	// Only, when set, keeps only the checks of these names; Skip leaves
	// out those of these names. The canaries are planted only when a kept
	// check reads one.
	Only, Skip []string
}

// keeps reports whether s runs the check called name.
func (s Setup) keeps(name string) bool {
	return (s.Only == nil || slices.Contains(s.Only, name)) && !slices.Contains(s.Skip, name)
}

// selected are the checks and unchecked checks s keeps.
func (s Setup) selected(checks []Check, un []record.ContainmentCheck) ([]Check, []record.ContainmentCheck) {
	checks = slices.DeleteFunc(checks, func(c Check) bool { return !s.keeps(c.Name) })
	un = slices.DeleteFunc(un, func(c record.ContainmentCheck) bool { return !s.keeps(c.Name) })
	return checks, un
}

// plantFor plants this run's canaries when one of checks reads one (nil
// when none does); remove them also after an error.
func plantFor(checks []Check, canaries []string) (*planted, error) {
	if !slices.ContainsFunc(checks, canaryCheck) {
		return nil, nil
	}
	pl, err := plant(canaries)
	if err != nil {
		return pl, fmt.Errorf("containment canaries: %w", err)
	}
	return pl, nil
}

// canaryCheck reports whether c reads a canary.
func canaryCheck(c Check) bool { return strings.HasPrefix(c.Name, "canary ") }

// Execute runs every containment check of Plan under p on this machine:
// each canary unreadable, a read-only path unwritable, a loopback port no
// rule names neither reachable nor bindable, and each limit it can reach
// holding; each check with a control first succeeds without any sandbox.
// It returns the record's checks and the names of those that did not hold;
// the error is for checks that could not be run at all.
func Execute(ctx context.Context, p *policy.Policy, s Setup) ([]record.ContainmentCheck, []string, error) {
	if len(s.Probe) == 0 || len(s.Enforcer) == 0 {
		return nil, nil, fmt.Errorf("containment: no probe or enforcer command")
	}
	canaries := s.Canaries
	if canaries == nil {
		canaries = DefaultCanaries
	}
	pp, err := probePolicy(p, s.Probe[0])
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(s.ScratchDir, "containment-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	cfg, cfgNoTimeout, err := writeProbePolicies(pp, dir)
	if err != nil {
		return nil, nil, err
	}
	listen, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("a loopback listener for the connect check: %w", err)
	}
	defer listen.Close()
	go acceptAll(listen)
	freePort, err := freeTCPPort()
	if err != nil {
		return nil, nil, fmt.Errorf("a free port for the bind check: %w", err)
	}
	// Only the fsize check needs the working directory, which writableDir
	// creates when missing: a run of other checks beside the exercise's
	// runs (Setup.Only) must not create it between a run's removal of it
	// and its fresh copy.
	var wd string
	if s.keeps(FsizeCheck) {
		wd = writableDir(p, s.WorkDir)
	}
	checks, un := s.selected(Plan(p, PlanOptions{Canaries: canaries, ListenPort: listen.Addr().(*net.TCPAddr).Port,
		FreePort: freePort, WritableDir: wd, MaxSeconds: s.MaxSeconds, MemoryMB: memoryMB(),
		NProcUnenforced: nprocUnenforced(p)}))
	if slices.ContainsFunc(checks, func(c Check) bool { return c.Name == FsizeCheck }) {
		// The fsize probe under the policy writes its file there and may
		// not remove it (a policy without remove_file): removed here, so
		// that a later control's O_EXCL create does not fail on it.
		defer os.Remove(filepath.Join(wd, FsizeCheckName))
	}
	pl, err := plantFor(checks, canaries)
	defer pl.remove()
	if err != nil {
		return nil, nil, err
	}
	return Run(ctx, checks, un, s.prober(cfg, cfgNoTimeout, pl))
}

// probePolicy is p as the probe runs under it: with the probe binary
// (probe, looked up in PATH) granted, the hierarchy normalised, and
// without a mem_mb the probe could not start under (Plan leaves that
// check unchecked).
func probePolicy(p *policy.Policy, probe string) (*policy.Policy, error) {
	bin, err := exec.LookPath(probe)
	if err == nil {
		bin, err = filepath.EvalSymlinks(bin)
	}
	if err != nil {
		return nil, fmt.Errorf("the containment probe: %w", err)
	}
	pp, err := WithProbe(p, bin).NormaliseHierarchy()
	if err != nil {
		return nil, err
	}
	if memBelowProbe(pp) {
		pp = pp.Clone()
		delete(pp.Limits, policy.MemMB)
	}
	return pp, nil
}

// prober runs the probe, behind the enforcer with the policy in cfg (or
// cfgNoTimeout for a check without the timeout) when sandboxed, on this
// run's canaries (pl) where a check names a template.
func (s Setup) prober(cfg, cfgNoTimeout string, pl *planted) Probe {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	var ranMu sync.Mutex // Run runs some checks at once; Ran need not be safe for that
	return func(ctx context.Context, sandboxed bool, c Check) (int, []byte, error) {
		argv := append(append([]string(nil), s.Probe...), pl.args(c.Args)...)
		if sandboxed {
			f := cfg
			if c.WithoutTimeout {
				f = cfgNoTimeout
			}
			argv = append(enforcer.Command(s.Enforcer, f), argv...)
		}
		if s.Ran != nil {
			ranMu.Lock()
			for range Operations(c.Args) {
				s.Ran()
			}
			ranMu.Unlock()
		}
		return ExecProbe(ctx, argv, s.Env, max(timeout, c.Cap))
	}
}

// writeProbePolicies writes pp and pp without its timeout (for the cpu
// check, which only the CPU limit may end) into dir.
func writeProbePolicies(pp *policy.Policy, dir string) (string, string, error) {
	noTimeout := pp.Clone()
	delete(noTimeout.Limits, policy.Timeout)
	cfg, cfgNoTimeout := filepath.Join(dir, "containment.cfg"), filepath.Join(dir, "containment-no-timeout.cfg")
	if err := os.WriteFile(cfg, pp.Render(), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(cfgNoTimeout, noTimeout.Render(), 0o600); err != nil {
		return "", "", err
	}
	return cfg, cfgNoTimeout, nil
}

// memoryMB is this machine's RAM plus swap in MiB, 0 if unknown.
func memoryMB() int64 {
	m := machine.MeminfoMB("MemTotal", "SwapTotal")
	return m["MemTotal"] + m["SwapTotal"]
}

func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writableDir is work when p grants it [write] and [create] (the fsize
// check writes a file there), else "".
func writableDir(p *policy.Policy, work string) string {
	if work == "" || !placement.Covered(p, work, policy.Write) || !placement.Covered(p, work, policy.Create) {
		return ""
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return ""
	}
	return work
}

// nprocUnenforced says why p's nproc limit cannot hold here, or "": uid 0
// is not bound by RLIMIT_NPROC, so it needs the enforcer's cgroup cap.
func nprocUnenforced(p *policy.Policy) string {
	if _, ok := p.Limits[policy.NProc]; !ok || os.Getuid() != 0 {
		return ""
	}
	if caps := enforcer.CgroupCaps(); strings.HasPrefix(caps, "none") {
		return "uid 0, which RLIMIT_NPROC does not bind, and the enforcer has no cgroup for its process cap here (" + caps + ")"
	}
	return ""
}
