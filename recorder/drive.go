package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ScriptError is a script that did not run to its end: the step that
// failed, and why.
type ScriptError struct {
	Step Step
	Err  error
}

func (e *ScriptError) Error() string {
	return fmt.Sprintf("script line %d (%s): %v", e.Step.Line, e.Step.Source, e.Err)
}

func (e *ScriptError) Unwrap() error { return e.Err }

// ErrExpectTimeout is an expect line whose expression did not appear in
// time.
var ErrExpectTimeout = errors.New("timed out")

// terminal collects what the program writes to its terminal, so expect can
// match it and idle can tell quiet from busy.
type terminal struct {
	mu      sync.Mutex
	out     []byte
	mark    int // expect matches after this offset
	last    time.Time
	closed  bool
	changed chan struct{}
}

func newTerminal() *terminal {
	return &terminal{last: time.Now(), changed: make(chan struct{})}
}

// pump copies r into the terminal (and to transcript) until r ends.
func (t *terminal) pump(r io.Reader, transcript io.Writer) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		t.mu.Lock()
		if n > 0 {
			t.out = append(t.out, buf[:n]...)
			t.last = time.Now()
			if transcript != nil {
				transcript.Write(buf[:n])
			}
		}
		if err != nil {
			t.closed = true
		}
		close(t.changed)
		t.changed = make(chan struct{})
		t.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (t *terminal) step(ctx context.Context, st Step, w io.Writer) error {
	switch st.Op {
	case OpSend, OpKey:
		_, err := io.WriteString(w, st.Text)
		return err
	case OpSleep:
		return sleep(ctx, st.Wait)
	case OpIdle:
		return t.idle(ctx, st.Wait)
	case OpExpect:
		return t.expect(ctx, st)
	}
	return fmt.Errorf("unknown step %q", st.Op)
}

func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// expect waits until st.Expect matches what the program wrote since the
// last match, and moves the mark past the match.
func (t *terminal) expect(ctx context.Context, st Step) error {
	deadline := time.NewTimer(st.Wait)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		seen := t.out[t.mark:]
		if loc := st.Expect.FindIndex(seen); loc != nil {
			t.mark += loc[1]
			t.mu.Unlock()
			return nil
		}
		closed, changed := t.closed, t.changed
		tail := lastChars(string(seen), 200)
		t.mu.Unlock()
		if closed {
			return fmt.Errorf("the program's terminal closed before /%s/ appeared; it wrote since the last match: %q", st.Expect, tail)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("expect /%s/ %w after %s; the program wrote since the last match: %q", st.Expect, ErrExpectTimeout, st.Wait, tail)
		case <-changed:
		}
	}
}

// idle waits until the program has written nothing for d.
func (t *terminal) idle(ctx context.Context, d time.Duration) error {
	for {
		t.mu.Lock()
		quiet := time.Since(t.last)
		closed := t.closed
		t.mu.Unlock()
		if quiet >= d || closed {
			return nil
		}
		if err := sleep(ctx, d-quiet); err != nil {
			return err
		}
	}
}

func lastChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-n:], "")
}
