package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// Window is the terminal size a scripted session runs in.
var Window = unix.Winsize{Row: 24, Col: 80}

// exitGrace is how long a program may take to exit after its script ended
// before its terminal is hung up.
const exitGrace = 20 * time.Second

// Session is one scripted run of a command on a pseudo-terminal.
type Session struct {
	Argv []string
	Dir  string
	Env  []string
	// Script drives the terminal; nil leaves it untouched until the
	// program exits.
	Script *Script
	// Input, if set, makes the session interactive: a stream of
	// proto.ReadInput messages whose data is typed into the terminal and
	// whose window sizes are applied to it (TIOCSWINSZ, so the program
	// gets SIGWINCH from its own terminal). The session then lasts until
	// the program exits, with no hang-up.
	Input io.Reader
	// Output receives what the program writes to its terminal as it
	// writes it (nil: only the transcript).
	Output io.Writer
	// Window is the terminal's first size (zero: Window).
	Window unix.Winsize
	// OnStart, if set, is told the program's process ID once it started
	// (a limits.Sampler's Watch).
	OnStart func(pid int)
}

// SessionResult is how the session ended.
type SessionResult struct {
	Status int
	// Transcript is everything the program wrote to its terminal.
	Transcript []byte
	// ScriptErr is the step that did not finish (nil: the script ran to
	// its end).
	ScriptErr error
	// HungUp is true when the program outlived its script and was hung up.
	HungUp  bool
	Seconds float64
	// TTY is the terminal's slave path (/dev/pts/<n>).
	TTY string
}

// openPTY opens a pseudo-terminal pair through /dev/ptmx, the slave sized
// to win and named.
func openPTY(win unix.Winsize) (master, slave *os.File, name string, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, "", fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(m), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, "", fmt.Errorf("unlock the pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, "", fmt.Errorf("name the pseudo-terminal: %w", err)
	}
	name = "/dev/pts/" + strconv.Itoa(n)
	slave, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, "", err
	}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &win); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, "", fmt.Errorf("size the pseudo-terminal: %w", err)
	}
	return master, slave, name, nil
}

// RunSession runs s.Argv in a session of its own whose controlling
// terminal is a fresh pseudo-terminal, drives it with s.Script, and waits
// for it to exit (hanging it up exitGrace after the script ended). The
// error is for a command that could not be started.
func RunSession(ctx context.Context, s Session) (*SessionResult, error) {
	win := s.Window
	if win.Row == 0 || win.Col == 0 {
		win = Window
	}
	master, slave, tty, err := openPTY(win)
	if err != nil {
		return nil, err
	}
	defer master.Close()
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		slave.Close()
		return nil, fmt.Errorf("start %s: %w", s.Argv[0], err)
	}
	slave.Close()
	if s.OnStart != nil {
		s.OnStart(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var transcript bytes.Buffer
	res := &SessionResult{TTY: tty}
	script := s.Script
	if script == nil {
		script = &Script{}
	}
	t := newTerminal()
	var out io.Writer = &transcript
	if s.Output != nil {
		out = io.MultiWriter(&transcript, s.Output)
	}
	go t.pump(master, out)
	grace := exitGrace
	if s.Input != nil {
		go feedInput(s.Input, master)
		grace = interactiveWait
	}
	res.ScriptErr = t.run(ctx, script, master)
	if res.ScriptErr != nil {
		grace = 0 // a failed session has nothing left to wait for
	}
	werr := waitOrHangUp(ctx, cmd, done, grace, res)
	res.Seconds = time.Since(t0).Seconds()
	t.mu.Lock()
	res.Transcript = bytes.Clone(transcript.Bytes())
	t.mu.Unlock()
	res.Status = exitStatus(werr)
	return res, nil
}

// interactiveWait is how long an interactive session may last: as long as
// the program runs (the guest's job deadline and ctx bound it).
const interactiveWait = time.Duration(1<<63 - 1)

// feedInput types in's data into the terminal master and applies its
// window sizes, until in ends or the terminal goes away. A malformed
// message ends the input (the program keeps running until it exits).
func feedInput(in io.Reader, master *os.File) {
	for {
		m, err := proto.ReadInput(in)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				fmt.Fprintf(os.Stderr, "record: the input stream ended: %v\n", err)
			}
			return
		}
		if m.Kind == proto.InputWindow {
			ws := unix.Winsize{Row: m.Rows, Col: m.Cols}
			if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &ws); err != nil {
				return
			}
			continue
		}
		if _, err := master.Write(m.Data); err != nil {
			return
		}
	}
}

// run drives the script's steps against the program's terminal; a
// *ScriptError names the step that did not finish.
func (t *terminal) run(ctx context.Context, s *Script, w io.Writer) error {
	for _, st := range s.Steps {
		if err := t.step(ctx, st, w); err != nil {
			return &ScriptError{Step: st, Err: err}
		}
	}
	return nil
}

// waitOrHangUp waits for the program; after grace it hangs the
// terminal up (SIGHUP to the session), then kills it.
func waitOrHangUp(ctx context.Context, cmd *exec.Cmd, done chan error, grace time.Duration, res *SessionResult) error {
	tm := time.NewTimer(grace)
	defer tm.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	case <-tm.C:
	}
	res.HungUp = true
	unix.Kill(-cmd.Process.Pid, unix.SIGHUP)
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
	}
	unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	return <-done
}

// exitStatus is a wait's status as a shell reports it (128+n for a
// signal).
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}
