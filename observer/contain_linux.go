package observer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// ProbeArgs is the argv (after the lockstep binary) of a containment probe
// child trying op with arg; cmd/lockstep's observe verb hands --probe and
// --probe-arg to ProbeMain. (A LOCKSTEP_ROLE would not do: the enforcer
// strips it from the command's environment.)
func ProbeArgs(op, arg string) []string {
	return []string{"observe", "--probe", op, "--probe-arg", arg}
}

// Probe exit statuses: the access was refused as wanted, it was allowed, or
// the probe could not tell.
const (
	probeHeld    = 0
	probeAllowed = 1
	probeError   = 2
)

// Longest limits probed by waiting them out; longer ones are skipped, said so.
const (
	maxProbedTimeout = 15 * time.Second
	maxProbedCPU     = 10
	maxProbedNProc   = 32
)

// contain runs the containment checks under p (the policy that settled):
// a canary file outside every grant stays unreadable, a path granted only
// for reading stays unwritable, a TCP port no rule names stays unreachable,
// and each limit holds.
func (v *verification) contain(ctx context.Context, p *policy.Policy) ([]ContainmentCheck, error) {
	o := v.o
	o.progress("%s: containment checks", v.ex.Name)
	pp := withProbe(p, o.exe)
	var checks []ContainmentCheck
	add := func(c ContainmentCheck) { checks = append(checks, c) }

	// A canary outside every grant.
	canary, cleanup, err := makeCanary(p)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	add(v.probe(ctx, pp, "canary", "read", canary, 0))

	// A write into a path granted for reading only.
	if target := readOnlyPath(p); target != "" {
		add(v.probe(ctx, pp, "read-only-write", "write", target, 0))
	} else {
		add(ContainmentCheck{Name: "read-only-write", Skipped: true, Detail: "the policy grants no path for reading only"})
	}

	// A connect to a listening port no rule names.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("containment listener: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if connectAllowed(p, port) {
		add(ContainmentCheck{Name: "connect", Skipped: true, Detail: fmt.Sprintf("the policy allows a TCP connect to port %d", port)})
	} else {
		add(v.probe(ctx, pp, "connect", "connect", "127.0.0.1:"+strconv.Itoa(port), 0))
	}
	ln.Close()

	// One probe per limit.
	keys := make([]string, 0, len(p.Limits))
	for k, l := range p.Limits {
		if !l.Off && l.Value > 0 {
			keys = append(keys, string(k))
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(v.limitProbe(ctx, pp, policy.LimitKey(k), p.Limits[policy.LimitKey(k)].Value))
	}
	return checks, nil
}

func (v *verification) limitProbe(ctx context.Context, pp *policy.Policy, k policy.LimitKey, val int64) ContainmentCheck {
	name := "limit " + string(k)
	switch k {
	case policy.NoFile, policy.FsizeMB, policy.MemMB:
		return v.probe(ctx, pp, name, string(k), strconv.FormatInt(val, 10), 0)
	case policy.NProc:
		if val > maxProbedNProc {
			return ContainmentCheck{Name: name, Skipped: true, Detail: fmt.Sprintf("nproc=%d is above the %d processes a guest probe starts", val, maxProbedNProc)}
		}
		return v.probe(ctx, pp, name, "nproc", strconv.FormatInt(val, 10), 0)
	case policy.Timeout:
		d := time.Duration(val) * time.Millisecond
		if d > maxProbedTimeout {
			return ContainmentCheck{Name: name, Skipped: true, Detail: fmt.Sprintf("timeout=%v is longer than the %v a guest probe waits", d, maxProbedTimeout)}
		}
		return v.probe(ctx, pp, name, "sleep", (d + 10*time.Second).String(), enforcer.StatusTimeout)
	case policy.CPU:
		if val > maxProbedCPU {
			return ContainmentCheck{Name: name, Skipped: true, Detail: fmt.Sprintf("cpu=%d s is longer than the %d s a guest probe spins", val, maxProbedCPU)}
		}
		return v.probe(ctx, pp, name, "spin", strconv.FormatInt(val+10, 10), 128+int(syscall.SIGXCPU))
	}
	return ContainmentCheck{Name: name, Skipped: true, Detail: "no probe for this limit"}
}

// probe runs one probe child under pp. want is 0 when the child judges
// itself (probeHeld), else the status the enforcer must end it with.
func (v *verification) probe(ctx context.Context, pp *policy.Policy, name, op, arg string, want int) ContainmentCheck {
	var out bytes.Buffer
	status, err := enforcer.Run(ctx, enforcer.Options{Policy: pp, Command: append([]string{v.o.exe}, ProbeArgs(op, arg)...),
		Dir: "/", Stdout: &out, Stderr: &out, Quiet: true, Self: v.o.exe})
	detail := strings.TrimSpace(out.String())
	c := ContainmentCheck{Name: name, Detail: fmt.Sprintf("%s %s: status %d: %s", op, arg, status, detail)}
	if want != 0 {
		c.Held = status == want || (want == 128+int(syscall.SIGXCPU) && status == 128+int(syscall.SIGKILL))
	} else {
		c.Held = err == nil && status == probeHeld
	}
	if err != nil && want == 0 {
		c.Detail += ": " + err.Error()
	}
	return c
}

// withProbe grants the probe binary itself (read and execute), nothing else.
func withProbe(p *policy.Policy, exe string) *policy.Policy {
	q := *p
	q.FS = make(map[string]map[policy.Section]bool, len(p.FS)+1)
	for path, s := range p.FS {
		q.FS[path] = s
	}
	secs := map[policy.Section]bool{policy.Read: true, policy.Execute: true}
	for s, on := range p.FS[exe] {
		secs[s] = on
	}
	q.FS[exe] = secs
	return &q
}

// covered reports whether any grant of p names path or one of its parents.
func covered(p *policy.Policy, path string) bool {
	for g := range p.FS {
		if g == "/" || g == path || strings.HasPrefix(path, g+"/") {
			return true
		}
	}
	return false
}

// makeCanary writes a file with random content in a new directory no grant
// covers.
func makeCanary(p *policy.Policy) (string, func(), error) {
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return "", nil, err
	}
	for _, base := range []string{"/var/tmp", "/tmp", "/root", "/srv", "/"} {
		dir := filepath.Join(base, "lockstep-canary-"+hex.EncodeToString(tok[:]))
		if covered(p, dir) {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		f := filepath.Join(dir, "canary")
		if err := os.WriteFile(f, []byte("canary "+hex.EncodeToString(tok[:])+"\n"), 0o644); err != nil {
			os.RemoveAll(dir)
			continue
		}
		return f, func() { os.RemoveAll(dir) }, nil
	}
	return "", nil, errors.New("containment: no place outside every grant for a canary")
}

// readOnlyPath is the first path (sorted) p grants for reading and for
// nothing that writes or creates, and that exists.
func readOnlyPath(p *policy.Policy) string {
	paths := make([]string, 0, len(p.FS))
	for path := range p.FS {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		s := p.FS[path]
		if !s[policy.Read] || s[policy.Write] || s[policy.Create] || s[policy.Delete] || s[policy.CreateIPC] || s[policy.CreateSymlink] || s[policy.Restructure] {
			continue
		}
		if covered(writable(p), path) {
			continue
		}
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	return ""
}

// writable is the part of p that grants writing or creating.
func writable(p *policy.Policy) *policy.Policy {
	q := &policy.Policy{FS: map[string]map[policy.Section]bool{}}
	for path, s := range p.FS {
		if s[policy.Write] || s[policy.Create] {
			q.FS[path] = s
		}
	}
	return q
}

// connectAllowed reports whether a connect rule of p could allow a TCP
// connect to 127.0.0.1:port.
func connectAllowed(p *policy.Policy, port int) bool {
	for _, c := range p.Connect {
		if c.Transport == policy.TCP && (c.Port == 0 || c.Port == port) {
			return true
		}
	}
	return false
}

// ProbeMain is the probe child (`lockstep observe --probe op --probe-arg
// arg`): it tries the access op names and returns 0 when it was refused as a
// contained process's must be, 1 when it was allowed, 2 when it could not
// tell. One line on stdout says what happened.
func ProbeMain(op, arg string) int {
	held, detail := probeOnce(op, arg)
	fmt.Println(detail)
	return held
}

func probeOnce(op, arg string) (int, string) {
	refused := func(err error, what string) (int, string) {
		switch {
		case err == nil:
			return probeAllowed, what + " succeeded"
		case errors.Is(err, unix.EACCES):
			return probeHeld, what + ": " + err.Error()
		}
		return probeError, what + ": " + err.Error() + " (wanted EACCES)"
	}
	switch op {
	case "read":
		_, err := os.ReadFile(arg)
		return refused(err, "read "+arg)
	case "write":
		fi, err := os.Stat(arg)
		if err != nil {
			return probeError, err.Error()
		}
		if fi.IsDir() {
			name := filepath.Join(arg, ".lockstep-probe")
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err == nil {
				f.Close()
				os.Remove(name)
			}
			return refused(err, "create "+name)
		}
		f, err := os.OpenFile(arg, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return refused(err, "open "+arg+" for writing")
	case "connect":
		c, err := net.DialTimeout("tcp4", arg, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return refused(err, "connect "+arg)
	case "nofile":
		n, _ := strconv.Atoi(arg)
		var fds []int
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		for i := 0; i < n+16; i++ {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				if errors.Is(err, unix.EMFILE) {
					return probeHeld, fmt.Sprintf("EMFILE after %d pipes (limit %d descriptors)", i, n)
				}
				return probeError, err.Error()
			}
			fds = append(fds, p[0], p[1])
		}
		return probeAllowed, fmt.Sprintf("opened %d descriptors, limit %d", len(fds), n)
	case "fsize_mb":
		n, _ := strconv.ParseInt(arg, 10, 64)
		signal.Ignore(syscall.SIGXFSZ)
		fd, err := unix.MemfdCreate("lockstep-probe", unix.MFD_CLOEXEC)
		if err != nil {
			return probeError, err.Error()
		}
		defer unix.Close(fd)
		if err := unix.Ftruncate(fd, n<<20); err != nil {
			return probeError, fmt.Sprintf("a file of exactly %d MiB: %v", n, err)
		}
		err = unix.Ftruncate(fd, n<<20+1)
		if errors.Is(err, unix.EFBIG) {
			return probeHeld, fmt.Sprintf("a file one byte over %d MiB: %v", n, err)
		}
		return probeAllowed, fmt.Sprintf("a file one byte over %d MiB: %v", n, err)
	case "mem_mb":
		n, _ := strconv.ParseInt(arg, 10, 64)
		size := int((n + 64) << 20)
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if errors.Is(err, unix.ENOMEM) {
			return probeHeld, fmt.Sprintf("mapping %d MiB: %v", n+64, err)
		}
		if err == nil {
			unix.Munmap(b)
		}
		return probeAllowed, fmt.Sprintf("mapping %d MiB: %v", n+64, err)
	case "nproc":
		n, _ := strconv.Atoi(arg)
		var procs []*os.Process
		defer func() {
			for _, p := range procs {
				p.Kill()
				p.Wait()
			}
		}()
		exe, _ := os.Executable()
		for i := 0; i < n+2; i++ {
			p, err := os.StartProcess(exe, append([]string{exe}, ProbeArgs("sleep", "30s")...), &os.ProcAttr{})
			if err != nil {
				if errors.Is(err, unix.EAGAIN) {
					return probeHeld, fmt.Sprintf("EAGAIN after %d processes (limit %d)", i, n)
				}
				return probeError, err.Error()
			}
			procs = append(procs, p)
		}
		return probeAllowed, fmt.Sprintf("started %d processes, limit %d", len(procs), n)
	case "sleep":
		d, _ := time.ParseDuration(arg)
		time.Sleep(d)
		return probeAllowed, "slept " + arg
	case "spin":
		n, _ := strconv.Atoi(arg)
		end := time.Now().Add(time.Duration(n) * time.Second)
		for time.Now().Before(end) {
		}
		return probeAllowed, "spun " + arg + " s"
	}
	return probeError, fmt.Sprintf("unknown probe %q", op)
}
