//go:build linux

package repro

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"github.com/lockstep-sandbox/lockstep/observer/engine"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// lockstepBinary builds cmd/lockstep once: the enforcer the runs execute.
func lockstepBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "repro-test-bin."); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "lockstep")
		binErr = lockstepbin.BuildTo(binPath)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

const (
	pyUDP = `import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.1", 5000)); print("bound")`
	pyTCP = `import socket; socket.socket().bind(("127.0.0.1", 5000)); print("bound")`
)

func hostPolicy(t *testing.T, files ...string) *policy.Policy {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("testdata", f))
	}
	p, err := policy.Load("", paths)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func needHost(t *testing.T) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("collecting audit records needs root")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the cases bind with /usr/bin/python3, which this machine lacks")
	}
	abi, err := enforcer.HostABI()
	if err != nil || abi < 7 {
		t.Fatalf("Landlock ABI = %d, %v; this machine promises at least 7 (audit logging)", abi, err)
	}
	return abi
}

// TestObserveHereTCPBind: the host kernel refuses the TCP bind, strace
// sees it inside the domain, and its net.bind_tcp record is joined to it.
func TestObserveHereTCPBind(t *testing.T) {
	needHost(t)
	o, err := engine.ObserveHere(t.Context(), engine.HereOptions{Policy: hostPolicy(t, "udp.cfg"), Command: []string{"/usr/bin/python3", "-c", pyTCP},
		Exe: lockstepBinary(t), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if o.Indeterminate != "" || !o.Audit || o.Status != 1 {
		t.Fatalf("observation = %+v, want observed with audit, status 1", o)
	}
	if len(o.Refusals) != 1 {
		t.Fatalf("refusals = %+v, want the bind alone", o.Refusals)
	}
	r := o.Refusals[0]
	if r.Call != "bind" || strings.Join(r.Objects, ",") != "5000/tcp" || strings.Join(r.Rights, ",") != "net.bind_tcp" ||
		strings.Join(r.Grant, ";") != "[bind] allow 5000" || !strings.Contains(r.Line, "bind(") {
		t.Errorf("refusal = %+v, want bind 5000/tcp net.bind_tcp granted by [bind] allow 5000", r)
	}
	if len(r.Audit) != 1 || !strings.Contains(r.Audit[0], "blockers=net.bind_tcp") || !strings.Contains(r.Audit[0], "src=5000") {
		t.Errorf("audit = %q, want the net.bind_tcp record for port 5000", r.Audit)
	}
	if o.AuditRecords != 1 || len(o.AuditOnly) != 0 {
		t.Errorf("records = %d, audit-only %q; want one record, taken", o.AuditRecords, o.AuditOnly)
	}
}

// TestObserveHereUDPRuleBelowABI10: a UDP row on this ABI-7 kernel is a
// refusal of the policy (125), carried as the rule, with no refusals.
func TestObserveHereUDPRuleBelowABI10(t *testing.T) {
	needHost(t)
	featuretest.RequireWithout(t, featuretest.LandlockUDP)
	o, err := engine.ObserveHere(t.Context(), engine.HereOptions{Policy: hostPolicy(t, "udp.cfg", "udp-allow.cfg"),
		Command: []string{"/usr/bin/python3", "-c", pyUDP}, Exe: lockstepBinary(t), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != 125 || len(o.Refusals) != 0 || len(o.Unenforceable) != 1 || o.Unenforceable[0].Rule != "[bind] allow 5000 udp" ||
		o.Unenforceable[0].NeedABI != 10 || o.Indeterminate != "" {
		t.Errorf("observation = %+v, want status 125 naming [bind] allow 5000 udp (ABI 10)", o)
	}
}

// TestRunHostHost: the same command on the host twice refuses the same.
func TestRunHostHost(t *testing.T) {
	needHost(t)
	res, err := Host(t.Context(), HostOptions{Kernels: [2]Kernel{{Name: HostKernel}, {Name: HostKernel}}, Policy: hostPolicy(t, "udp.cfg"),
		Command: []string{"/usr/bin/python3", "-c", pyTCP}, Exe: lockstepBinary(t), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusSame || len(res.Same) != 1 || len(res.Differences) != 0 || res.PolicyHash == "" {
		t.Errorf("Host = status %d (%s), same %d, differences %+v; want status 0 with the bind alike", res.Status, res.Reason, len(res.Same), res.Differences)
	}
}
