package kernel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
)

// command runs one external program, logging it first as a pasteable shell
// line at debug level (what `lockstep -v` shows).
type command struct {
	log    *slog.Logger
	dir    string
	env    []string // added to the environment
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// cpu, when set, receives the user+system CPU time of the process and
	// the descendants it waited for (make's compilers).
	cpu *time.Duration
	// onlyEnv makes env the whole environment instead of an addition.
	onlyEnv bool
}

func (c command) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.dir
	switch {
	case c.onlyEnv:
		cmd.Env = append([]string{}, c.env...) // an empty, non-nil Env is an empty environment
	case len(c.env) > 0:
		cmd.Env = append(os.Environ(), c.env...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	// Stop politely first (make cleans up its children), then for good.
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	env := c.env
	if c.onlyEnv {
		env = append([]string{"env", "-i"}, env...)
	}
	c.log.Debug("$ " + shellLine(c.dir, env, name, args))
	err := cmd.Run()
	if c.cpu != nil && cmd.ProcessState != nil {
		*c.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// output runs name and returns its trimmed stdout.
func (c command) output(ctx context.Context, name string, args ...string) (string, error) {
	var b strings.Builder
	c.stdout = &b
	var eb strings.Builder
	if c.stderr == nil {
		c.stderr = &eb
	}
	if err := c.run(ctx, name, args...); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(eb.String()))
	}
	return strings.TrimSpace(b.String()), nil
}

func shellLine(dir string, env []string, name string, args []string) string {
	line := shellquote.Join(append(append(append([]string(nil), env...), name), args...))
	if dir != "" {
		line = "cd " + shellquote.Join([]string{dir}) + " && " + line
	}
	return line
}

// progress logs "<stage> <elapsed> <detail()>" every interval until stop is
// called, so a long stage never looks like a hang.
func progress(log *slog.Logger, interval time.Duration, stage string, detail func() string) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				attrs := []any{"stage", stage, "elapsed", time.Since(start).Round(time.Second).String()}
				if detail != nil {
					if d := detail(); d != "" {
						attrs = append(attrs, "at", d)
					}
				}
				log.Info("kernel: working", attrs...)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// lastLineWriter passes writes to w and remembers the last complete line
// that looks like a Kbuild step ("  CC      kernel/fork.o").
type lastLineWriter struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	last    string
	tail    []string // the last lines, for error reports
}

const tailLines = 40

func (l *lastLineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.partial = append(l.partial, p...)
	for {
		i := strings.IndexByte(string(l.partial), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(l.partial[:i]), "\r")
		l.partial = l.partial[i+1:]
		if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(line, "  ") && strings.ToUpper(f[0]) == f[0] {
			l.last = f[0] + " " + f[1]
		}
		l.tail = append(l.tail, line)
		if len(l.tail) > tailLines {
			l.tail = l.tail[len(l.tail)-tailLines:]
		}
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lastLineWriter) Last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// LastLine is the last complete line written, whatever it looks like.
func (l *lastLineWriter) LastLine() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tail) == 0 {
		return ""
	}
	return l.tail[len(l.tail)-1]
}

func (l *lastLineWriter) Tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.tail, "\n")
}
