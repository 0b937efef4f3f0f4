package recorder

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// Passthrough is the user's terminal for an interactive session (record
// run without a script): what is typed on it reaches the program's
// terminal in the guest byte for byte, and its size follows.
type Passthrough struct {
	// In is read for keystrokes. A terminal is put in raw mode while the
	// session runs (so ^C is the byte 3, which the guest's line discipline
	// turns into SIGINT for the program, not for lockstep), and restored
	// on every way out of Run. A read of In still waiting when the session
	// ends is left to return on its own, its bytes dropped.
	In *os.File
	// Out receives what the program writes to its terminal.
	Out io.Writer
}

// window is p's terminal size, 24×80 when In is not a terminal.
func (p *Passthrough) window() (rows, cols uint16) {
	w, h, err := term.GetSize(int(p.In.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return Window.Row, Window.Col
	}
	return uint16(min(h, 0xffff)), uint16(min(w, 0xffff))
}

// passthroughSignals end an interactive session early: each cancels it,
// so Run returns and the terminal is restored before lockstep exits.
var passthroughSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// start puts In in raw mode and starts forwarding keystrokes and window
// sizes to the returned input stream. stop restores the terminal and
// ends the stream; ctx is cancelled by passthroughSignals.
func (p *Passthrough) start(ctx context.Context) (in io.Reader, sctx context.Context, stop func(), err error) {
	fd := int(p.In.Fd())
	restore := func() {}
	if term.IsTerminal(fd) {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return nil, nil, nil, err
		}
		restore = func() { term.Restore(fd, old) }
	}
	sctx, cancel := signal.NotifyContext(ctx, passthroughSignals...)
	pr, pw := io.Pipe()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go p.forwardWindow(winch, pw)
	go p.forwardKeys(pw)
	stop = func() {
		signal.Stop(winch)
		close(winch)
		cancel()
		pr.Close()
		restore()
	}
	return pr, sctx, stop, nil
}

// forwardKeys copies In to the input stream as data messages until In
// ends or the stream is closed.
func (p *Passthrough) forwardKeys(w io.Writer) {
	buf := make([]byte, proto.MaxInputData)
	for {
		n, err := p.In.Read(buf)
		if n > 0 && proto.WriteInputData(w, buf[:n]) != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

// forwardWindow sends the terminal's size on every SIGWINCH until winch
// is closed.
func (p *Passthrough) forwardWindow(winch <-chan os.Signal, w io.Writer) {
	for range winch {
		rows, cols := p.window()
		if proto.WriteInputWindow(w, rows, cols) != nil {
			return
		}
	}
}
