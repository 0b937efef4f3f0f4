package recorder

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

func needPython(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return p
}

func script(t *testing.T, text string) *Script {
	t.Helper()
	s, err := ParseScript(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A scripted REPL session on a real pseudo-terminal: the program sees a
// terminal (isatty) and the size of Window, and exits on ctrl-d.
func TestRunSessionREPL(t *testing.T) {
	py := needPython(t)
	s := script(t, "expect >>> 10\nsend import os,sys; print('tty', os.isatty(0), os.get_terminal_size(0).columns)\nkey enter\nexpect tty True 80 10\nexpect >>> 10\nkey ctrl-d\n")
	res, err := RunSession(context.Background(), Session{Argv: []string{py, "-q"}, Dir: t.TempDir(), Env: append(os.Environ(), "TERM=dumb"), Script: s})
	if err != nil {
		t.Fatal(err)
	}
	if res.ScriptErr != nil || res.Status != 0 || res.HungUp {
		t.Fatalf("script err %v, status %d, hung up %v; transcript %q", res.ScriptErr, res.Status, res.HungUp, res.Transcript)
	}
}

// An expect that times out fails the session naming its line.
func TestRunSessionExpectTimeoutNamesLine(t *testing.T) {
	py := needPython(t)
	s := script(t, "expect >>> 10\n# wait for what never comes\nexpect never-printed 0.5\nkey ctrl-d\n")
	res, err := RunSession(context.Background(), Session{Argv: []string{py, "-q"}, Dir: t.TempDir(), Env: append(os.Environ(), "TERM=dumb"), Script: s})
	if err != nil {
		t.Fatal(err)
	}
	var se *ScriptError
	if !errors.As(res.ScriptErr, &se) || se.Step.Line != 3 || !errors.Is(res.ScriptErr, ErrExpectTimeout) {
		t.Fatalf("script err %v, want a timeout at line 3", res.ScriptErr)
	}
	if !strings.Contains(res.ScriptErr.Error(), "script line 3") {
		t.Errorf("error %q does not name line 3", res.ScriptErr)
	}
}

// An interactive session on a real pseudo-terminal: typed data reaches the
// program, a window message resizes its terminal (the program reads the
// new size), ^C as the byte 3 interrupts it through its own line
// discipline (KeyboardInterrupt and the prompt again, not a killed
// session), ^D ends it, and the session lasts until the program exits.
func TestRunSessionInteractive(t *testing.T) {
	py := needPython(t)
	pr, pw := io.Pipe()
	defer pr.Close()
	var out syncBuffer
	done := make(chan *SessionResult, 1)
	go func() {
		res, err := RunSession(t.Context(), Session{Argv: []string{py, "-q"}, Dir: t.TempDir(), Env: append(os.Environ(), "TERM=dumb"),
			Input: pr, Output: &out, Window: unix.Winsize{Row: 30, Col: 100}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, 20*time.Second, &out, ">>> ")
	type_ := func(s string) {
		if err := proto.WriteInputData(pw, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	type_("import os; print('size', os.get_terminal_size(0))\r")
	waitFor(t, 20*time.Second, &out, "size os.terminal_size(columns=100, lines=30)")
	if err := proto.WriteInputWindow(pw, 40, 132); err != nil {
		t.Fatal(err)
	}
	type_("print('now', os.get_terminal_size(0))\r")
	waitFor(t, 20*time.Second, &out, "now os.terminal_size(columns=132, lines=40)")
	type_("import time; time.sleep(60)\r")
	time.Sleep(500 * time.Millisecond)
	type_("\x03")
	waitFor(t, 20*time.Second, &out, "KeyboardInterrupt\r\n>>> ")
	type_("\x04")
	res := <-done
	// Python ends with SIGINT after a REPL whose last error was a
	// KeyboardInterrupt (128+2); the session ended on ^D, not a hang-up.
	if res == nil || res.Status != 130 || res.HungUp || !bytes.Contains(res.Transcript, []byte("KeyboardInterrupt\r\n>>> ")) {
		t.Fatalf("session %+v; want status 130, not hung up, KeyboardInterrupt and a prompt in the transcript", res)
	}
}

// syncBuffer is a bytes.Buffer written by the session and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits up to within for want in out (a program on a host pty:
// seconds; a guest booting under TCG: minutes).
func waitFor(t *testing.T, within time.Duration, out *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(out.String(), want) {
			return
		}
	}
	t.Fatalf("%q did not appear within %s; the output was %q", want, within, out.String())
}
