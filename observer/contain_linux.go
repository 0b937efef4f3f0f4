package observer

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/contain"
	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/generalise"
	"github.com/lockstep-sandbox/lockstep/pruner/record"
)

// probeTimeout bounds one containment probe run.
const probeTimeout = 300 * time.Second

// contain runs pruner/contain's checks under p, the policy that settled
// (Phobos's KVM run has none): each canary unreadable, a read-only path
// unwritable, a loopback port no rule names neither reachable nor bindable,
// and each limit it can reach holding; each check with a control first
// succeeds without any sandbox. The probe is lockstep itself (`lockstep
// contain-probe`), run under `lockstep run` with p plus a grant to read and
// execute the probe binary.
func (v *verification) contain(ctx context.Context, p *policy.Policy) ([]record.ContainmentCheck, []string, error) {
	o := v.o
	o.progress("%s: containment checks", v.ex.Name)
	planted, err := contain.Plant(contain.DefaultCanaries)
	if err != nil {
		return nil, nil, fmt.Errorf("containment canaries: %w", err)
	}
	defer contain.Remove(planted)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("containment listener: %w", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("containment free port: %w", err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	writable := ""
	if generalise.Covered(p, o.work, policy.Write) && generalise.Covered(p, o.work, policy.Create) {
		if err := os.MkdirAll(o.work, 0o755); err == nil {
			writable = o.work
		}
	}
	nprocWhy := ""
	if _, ok := p.Limits[policy.NProc]; ok && os.Getuid() == 0 {
		if caps := enforcer.CgroupCaps(); strings.HasPrefix(caps, "none") {
			nprocWhy = "uid 0, which RLIMIT_NPROC does not bind, and the enforcer has no cgroup for its process cap here (" + caps + ")"
		}
	}
	checks, un := contain.Plan(p, contain.PlanOptions{Canaries: contain.DefaultCanaries, ListenPort: ln.Addr().(*net.TCPAddr).Port,
		FreePort: freePort, WritableDir: writable, NProcUnenforced: nprocWhy})

	pp := contain.WithProbe(p, o.exe)
	cfg := filepath.Join(o.scratch, v.ex.Stem()+".contain.cfg")
	noTimeout := filepath.Join(o.scratch, v.ex.Stem()+".contain-no-timeout.cfg")
	q := *pp
	q.Limits = map[policy.LimitKey]policy.Limit{}
	for k, l := range pp.Limits {
		if k != policy.Timeout {
			q.Limits[k] = l
		}
	}
	if err := os.WriteFile(cfg, pp.Render(), 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(noTimeout, q.Render(), 0o644); err != nil {
		return nil, nil, err
	}
	probe := func(ctx context.Context, sandboxed bool, c contain.Check) (int, []byte, error) {
		argv := append([]string{o.exe, contain.Verb}, c.Args...)
		if sandboxed {
			f := cfg
			if c.WithoutTimeout {
				f = noTimeout
			}
			argv = append([]string{o.exe, "run", "-q", "--config", f, "--"}, argv...)
		}
		v.es.Runs["containment probe"]++
		return contain.ExecProbe(ctx, argv, exercise.DefaultEnv(o.work), probeTimeout)
	}
	return contain.Run(ctx, checks, un, probe)
}
