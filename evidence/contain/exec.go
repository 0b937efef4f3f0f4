package contain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// ExecProbe runs one probe command line (argv, with env) bounded by timeout
// and returns its status (128+signal when a signal ended it) and stdout with
// stderr after it (ParseOutput reads only START and OP lines; stderr says
// why a probe did not start, e.g. the enforcer's refusal). An
// error means the command could not be run at all, or was stopped by the
// timeout or by ctx, never that it failed: a probe killed that way ends by
// SIGKILL (137), which the cpu and nproc checks take for their limit's.
func ExecProbe(ctx context.Context, argv, env []string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	// A process group of its own: nothing the probe or its enforcer
	// signals by group (kill(0), kill(-pgid)) can reach the caller, and a
	// timeout ends whatever the run started (an unsandboxed control's
	// nproc children), not the enforcer alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		return 0, nil, fmt.Errorf("%s: stopped, no outcome (its cap is %v): %w", strings.Join(argv, " "), timeout, ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, append(out.Bytes(), errb.Bytes()...), nil
	case errors.As(err, &ee):
		all := append(out.Bytes(), errb.Bytes()...)
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), all, nil
		}
		return ee.ExitCode(), all, nil
	}
	return 0, nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, errb.Bytes())
}

// WithProbe returns a copy of p that also grants the probe binary exe itself
// (read and execute), nothing else: the probe must start for a refusal it
// reports to mean anything.
func WithProbe(p *policy.Policy, exe string) *policy.Policy {
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
