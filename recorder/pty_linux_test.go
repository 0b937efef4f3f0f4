package recorder

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
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
