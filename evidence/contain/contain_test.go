package contain

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func names(cs []Check) string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name+"="+strings.Join(c.Args, " "))
	}
	return strings.Join(n, "; ")
}

func TestPlan(t *testing.T) {
	src := "[read]\n/usr/lib\n/work\n[write]\n/work\n[create]\n/work\n[limits]\ntimeout=60\ncpu=30\nnproc=64\nnofile=256\nfsize_mb=16\n"
	p, err := policy.Parse("t.cfg", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cs, un := Plan(p, PlanOptions{Canaries: []string{"/srv/c/secret"}, ListenPort: 4000, FreePort: 4001, WritableDir: "/work",
		ReadOnlyFile: func(d string) string { return d + "/libc.so.6" }})
	want := "canary /srv/c/secret=read /srv/c/secret; write into a read-only path=write /usr/lib/libc.so.6; " +
		"connect to an unnamed loopback port=connect 127.0.0.1:4000; bind of an ungranted port=bind 127.0.0.1:4001; " +
		"limit nofile=nofile 256; limit nproc=nproc 64; limit fsize_mb=fsize 16 /work; limit timeout=sleep 65; limit cpu=spin 100"
	if got := names(cs); got != want {
		t.Errorf("Plan checks:\n got %s\nwant %s", got, want)
	}
	// The cpu probe's wall-clock cap outlasts its spin (100 s of CPU) at
	// half a CPU, so only the limit or the spin's own end can stop it.
	if c := cs[len(cs)-1]; c.Cap != 200*time.Second {
		t.Errorf("the cpu check's cap %v; want 200 s, twice its 100 s spin", c.Cap)
	}
	if len(un) != 1 || un[0].Name != "limit mem_mb" {
		t.Errorf("Plan unchecked = %+v, want only mem_mb (not set)", un)
	}
	// Only their limits may end the nproc and cpu probes: under a short
	// timeout on a busy machine, starting 129 processes ran into it (status
	// 124) and the nproc check did not hold.
	for _, c := range cs {
		if want := c.Name == "limit nproc" || c.Name == "limit cpu"; c.WithoutTimeout != want {
			t.Errorf("%s: WithoutTimeout %v; want %v", c.Name, c.WithoutTimeout, want)
		}
	}

	// Caps, coverage and the timeout reaching first.
	src2 := "[read]\n/work\n[write]\n/work\n[connect]\nallow 127.0.0.1:*\n[bind]\nallow 4001\n[limits]\ntimeout=20\ncpu=30\nnofile=5000\nnproc=64\n"
	p2, _ := policy.Parse("t2.cfg", []byte(src2))
	cs, un = Plan(p2, PlanOptions{ListenPort: 4000, FreePort: 4001, MaxSeconds: 10, NProcUnenforced: "uid 0 without a cgroup",
		ReadOnlyFile: func(d string) string { return d + "/f" }})
	if len(cs) != 0 {
		t.Errorf("Plan(covered) checks = %s, want none", names(cs))
	}
	reasons := map[string]string{}
	for _, u := range un {
		reasons[u.Name] = u.Unchecked
	}
	for name, sub := range map[string]string{
		"write into a read-only path":         "no regular file",
		"connect to an unnamed loopback port": "covers 127.0.0.1:4000",
		"bind of an ungranted port":           "allow 4001",
		"limit nofile":                        "beyond the probe's cap",
		"limit timeout":                       "beyond the probe's cap 10",
		"limit cpu":                           "beyond",
		"limit nproc":                         "without a cgroup",
	} {
		if !strings.Contains(reasons[name], sub) {
			t.Errorf("unchecked %q = %q, want it to contain %q", name, reasons[name], sub)
		}
	}
}

func TestParseOutput(t *testing.T) {
	o := ParseOutput([]byte("START\nOP read ret=0 errno=EACCES\n"))
	if !o.Started || o.Errno != "EACCES" {
		t.Errorf("ParseOutput = %+v", o)
	}
	if o := ParseOutput([]byte("lockstep run: refused\n")); o.Started || o.Errno != "" {
		t.Errorf("ParseOutput(no start) = %+v", o)
	}
}

// fakeProbe answers a probe of one operation or a batch as a probe
// process would: START, then one OP line per operation with the errno
// errno gives it, and the status of the last refusal (1) or 0.
func fakeProbe(sandboxed bool, args []string, errno func(sandboxed bool, op []string) string) (int, []byte) {
	ops := [][]string{args}
	if args[0] == BatchOp {
		ops, _ = splitBatch(args[1:])
	}
	out, st := "START\n", 0
	for _, o := range ops {
		e := errno(sandboxed, o)
		out += fmt.Sprintf("OP %s ret=0 errno=%s\n", o[0], e)
		if e != "0" {
			st = 1
		}
	}
	return st, []byte(out)
}

// TestRun drives Run with a probe that obeys or not: a refused check
// holds, an allowed one and an unproven one are named, with the status a
// probe of that operation alone exits with.
func TestRun(t *testing.T) {
	checks := []Check{
		{Name: "a refused", Args: []string{"read", "/a"}, WantErrno: "EACCES", Control: true},
		{Name: "b allowed", Args: []string{"read", "/b"}, WantErrno: "EACCES", Control: true},
		{Name: "c unproven", Args: []string{"read", "/c"}, WantErrno: "EACCES", Control: true},
		{Name: "d timeout", Args: []string{"sleep", "9"}, WantStatus: []int{124}},
	}
	probe := func(_ context.Context, sandboxed bool, c Check) (int, []byte, error) {
		if c.Args[0] == "sleep" {
			return 124, []byte("START\n"), nil
		}
		st, out := fakeProbe(sandboxed, c.Args, func(sandboxed bool, op []string) string {
			switch {
			case op[1] == "/c" && !sandboxed:
				return "ENOENT"
			case sandboxed && op[1] == "/a":
				return "EACCES"
			}
			return "0"
		})
		return st, out, nil
	}
	out, failed, err := Run(t.Context(), checks, nil, probe)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || !out[0].Refused || out[1].Refused || out[2].Unchecked == "" || !out[3].Refused {
		t.Errorf("Run = %+v", out)
	}
	if len(failed) != 2 || failed[0] != "b allowed (status 0, OP read ret=0 errno=0)" || failed[1] != "c unproven (unproven)" {
		t.Errorf("failed = %q, want b and c", failed)
	}
	if c := out[2].Control; c != "failed: status 1, OP read ret=0 errno=ENOENT" {
		t.Errorf("c's control = %q", c)
	}
}

// TestRunBatches: the checks that read an errno run in two probe
// processes, the controls in one and the tries under the policy in the
// other (a check whose control failed is not tried), each check with its
// own outcome; the others have their own process each.
func TestRunBatches(t *testing.T) {
	checks := []Check{
		{Name: "canary", Args: []string{"read", "/srv/canary"}, WantErrno: "EACCES", Control: true},
		{Name: "read-only", Args: []string{"write", "/usr/x"}, WantErrno: "EACCES", Control: true},
		{Name: "connect", Args: []string{"connect", "127.0.0.1:9"}, WantErrno: "EACCES", Control: true},
		{Name: "nofile", Args: []string{"nofile", "256"}, WantErrno: "EMFILE", Control: true},
		{Name: "fsize", Args: []string{"fsize", "16", "/w"}, WantErrno: "EFBIG", Control: true},
		{Name: "unproven", Args: []string{"read", "/gone"}, WantErrno: "EACCES", Control: true},
		{Name: "nproc", Args: []string{"nproc", "8"}, WantErrno: "EAGAIN", WantStatus: []int{137}, Control: true},
	}
	var mu sync.Mutex
	var probes []string
	probe := func(_ context.Context, sandboxed bool, c Check) (int, []byte, error) {
		mu.Lock()
		probes = append(probes, fmt.Sprintf("%v %d", sandboxed, Operations(c.Args)))
		mu.Unlock()
		st, out := fakeProbe(sandboxed, c.Args, func(sandboxed bool, op []string) string {
			switch {
			case op[1] == "/gone":
				return "ENOENT"
			case !sandboxed:
				return "0"
			case op[0] == "nofile":
				return "EMFILE"
			case op[0] == "nproc":
				return "EAGAIN"
			case op[0] == "fsize":
				return "0" // not refused: the check fails
			}
			return "EACCES"
		})
		return st, out, nil
	}
	out, failed, err := Run(t.Context(), checks, nil, probe)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"false 1", "true 1", "false 6", "true 5"}; strings.Join(probes, "; ") != strings.Join(want, "; ") {
		t.Errorf("probes (sandboxed, operations) = %q, want %q", probes, want)
	}
	held := map[string]bool{}
	for _, rc := range out {
		held[rc.Name] = rc.Refused
	}
	for name, want := range map[string]bool{"canary": true, "read-only": true, "connect": true, "nofile": true, "fsize": false, "unproven": false, "nproc": true} {
		if held[name] != want {
			t.Errorf("%s refused = %v, want %v", name, held[name], want)
		}
	}
	if strings.Join(failed, "; ") != "fsize (status 0, OP fsize ret=0 errno=0); unproven (unproven)" {
		t.Errorf("failed = %q", failed)
	}
}

// TestProbeMainBatch runs a batch of the probe's operations in this
// process: one START, one OP line per operation in order, and status 1
// because one was refused (here: missing).
func TestProbeMainBatch(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := Batch([]string{"read", f}, []string{"read", filepath.Join(dir, "missing")}, []string{"nofile", "8"},
		[]string{"fsize", "1", dir}, []string{"create", dir})
	if n := Operations(args); n != 5 {
		t.Errorf("Operations(%q) = %d, want 5", args, n)
	}
	var b bytes.Buffer
	st := ProbeMain(args, &b)
	started, ops := ParseOps(b.Bytes())
	var errnos []string
	for _, o := range ops {
		errnos = append(errnos, o.Errno)
	}
	if st != 1 || !started || strings.Join(errnos, " ") != "0 ENOENT 0 0 0" {
		t.Errorf("ProbeMain(%q) = %d, %q", args, st, b.String())
	}
	for _, bad := range [][]string{{BatchOp}, {BatchOp, "2", "read"}, {BatchOp, "1", "pause"}, {BatchOp, "x", "read", "/"}} {
		if st := ProbeMain(bad, &b); st != 2 {
			t.Errorf("ProbeMain(%q) = %d, want 2", bad, st)
		}
	}
}

// TestRunWaitsAtOnce: the checks that wait a limit out (timeout, cpu) run
// at the same time as each other and the rest. Each waiting probe here
// returns only once the other has started, so run one after another they
// would never finish.
func TestRunWaitsAtOnce(t *testing.T) {
	checks := []Check{
		{Name: "limit cpu", Args: []string{"spin", "9"}, WantStatus: []int{152}},
		{Name: "limit timeout", Args: []string{"sleep", "9"}, WantStatus: []int{124}},
		{Name: "read canary", Args: []string{"read", "/a"}, WantErrno: "EACCES", Control: true},
	}
	var started sync.WaitGroup
	started.Add(2)
	probe := func(ctx context.Context, sandboxed bool, c Check) (int, []byte, error) {
		switch c.Args[0] {
		case "spin", "sleep":
			started.Done()
			done := make(chan struct{})
			go func() { started.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				return 0, nil, fmt.Errorf("%s waited 10 s for the other waiting check to start", c.Name)
			}
			if c.Args[0] == "spin" {
				return 152, []byte("START\n"), nil
			}
			return 124, []byte("START\n"), nil
		}
		st, out := fakeProbe(sandboxed, c.Args, func(sandboxed bool, op []string) string {
			if sandboxed {
				return "EACCES"
			}
			return "0"
		})
		return st, out, nil
	}
	out, failed, err := Run(t.Context(), checks, nil, probe)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 0 || len(out) != 3 {
		t.Fatalf("Run = %+v, failed %q", out, failed)
	}
	for _, rc := range out {
		if !rc.Refused {
			t.Errorf("%s not refused: %+v", rc.Name, rc)
		}
	}
}

// TestProbeMain runs the probe's file and network operations in this
// process, outside any sandbox.
func TestProbeMain(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		Args  []string
		Errno string
	}{
		{[]string{"read", f}, "0"},
		{[]string{"read", filepath.Join(dir, "missing")}, "ENOENT"},
		{[]string{"write", f}, "0"},
		{[]string{"create", dir}, "0"},
		{[]string{"fsize", "1", dir}, "0"},
		{[]string{"mem", "16"}, "0"},
		{[]string{"bind", "127.0.0.1:0"}, "0"},
	} {
		var b bytes.Buffer
		st := ProbeMain(tc.Args, &b)
		o := ParseOutput(b.Bytes())
		if !o.Started || o.Errno != tc.Errno || (st == 0) != (tc.Errno == "0") {
			t.Errorf("ProbeMain(%q) = %d, %q; want errno %s", tc.Args, st, b.String(), tc.Errno)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the probe left files behind: %v", ents)
	}
}

// TestPlantRemove: plant makes each template's file in a directory of its
// own, and remove takes exactly those directories.
func TestPlantRemove(t *testing.T) {
	dir := t.TempDir()
	c := []string{filepath.Join(dir, "srv/canary/secret"), filepath.Join(dir, "root-canary")}
	pl, err := plant(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range c {
		f := pl.args([]string{tmpl})[0]
		if f == tmpl || !strings.HasPrefix(f, dir+"/") || filepath.Base(f) != filepath.Base(tmpl) {
			t.Errorf("template %s planted as %s; want a file of that name in a new directory under %s", tmpl, f, dir)
		}
		if b, err := os.ReadFile(f); err != nil || string(b) != CanaryText {
			t.Errorf("canary %s: %q, %v", f, b, err)
		}
	}
	if got := pl.args([]string{"read", "/other"}); got[1] != "/other" {
		t.Errorf("args(/other) = %q; want it as it was", got)
	}
	pl.remove()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("remove left %v", ents)
	}
}

// TestPlantTwoRunsAtOnce: two runs planting the same templates beside each
// other (two prunes, parallel tests, a guest over the host's root) each get
// their own files; one run's removal leaves the other's canaries readable,
// and a file already at the template is neither written nor removed. With
// one fixed path for all runs, the first run's removal took the second's
// canary, whose control read then failed ("fails without any sandbox too").
func TestPlantTwoRunsAtOnce(t *testing.T) {
	dir := t.TempDir()
	c := []string{filepath.Join(dir, "srv/canary/secret"), filepath.Join(dir, "root-canary")}
	if err := os.WriteFile(c[1], []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	var runs [2]*planted
	var errs [2]error
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() { runs[i], errs[i] = plant(c) })
	}
	wg.Wait()
	defer runs[1].remove()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	for _, tmpl := range c {
		if a, b := runs[0].args([]string{tmpl})[0], runs[1].args([]string{tmpl})[0]; a == b {
			t.Errorf("both runs planted %s at %s", tmpl, a)
		}
	}
	runs[0].remove()
	for _, tmpl := range c {
		f := runs[1].args([]string{tmpl})[0]
		if b, err := os.ReadFile(f); err != nil || string(b) != CanaryText {
			t.Errorf("the second run's canary %s after the first run's removal: %q, %v", f, b, err)
		}
	}
	if b, err := os.ReadFile(c[1]); err != nil || string(b) != "someone else's" {
		t.Errorf("the file at the template %s: %q, %v; want it untouched", c[1], b, err)
	}
}

func TestPlanMemBeyondMachine(t *testing.T) {
	p := &policy.Policy{Limits: map[policy.LimitKey]policy.Limit{policy.MemMB: {Value: 1024}}}
	_, un := Plan(p, PlanOptions{MemoryMB: 700})
	found := false
	for _, u := range un {
		if u.Name == "limit mem_mb" && strings.Contains(u.Unchecked, "700 MiB") {
			found = true
		}
	}
	if !found {
		t.Errorf("mem_mb=1024 on a 700 MiB machine: unchecked = %+v, want limit mem_mb unchecked naming the machine's memory", un)
	}
	cs, _ := Plan(p, PlanOptions{MemoryMB: 4096})
	found = false
	for _, c := range cs {
		found = found || c.Name == "limit mem_mb"
	}
	if !found {
		t.Error("mem_mb=1024 on a 4 GiB machine is not checked")
	}
}

func TestExecuteLeavesNothing(t *testing.T) {
	// Execute's own files: the probe policies live in a directory it removes.
	dir := t.TempDir()
	if _, _, err := Execute(t.Context(), &policy.Policy{}, Setup{Probe: []string{"/nonexistent-probe", Verb}, Enforcer: []string{"x"},
		Canaries: []string{filepath.Join(dir, "c", "secret")}, ScratchDir: dir}); err == nil {
		t.Fatal("Execute with a missing probe binary succeeded")
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("Execute left %v in its scratch directory", left)
	}
}
