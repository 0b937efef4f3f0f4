package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progressLogger is the logger of a verb that shows its progress by
// default: a line per stage and run, "lockstep <verb> [<elapsed>] <msg>",
// besides the warnings ("lockstep <verb>: warning: …"); quiet (-q) leaves
// only the warnings, -v adds every external command. Where stderr is a
// terminal, withProgressDisplay turns the progress lines into one line
// that rewrites itself.
func progressLogger(io *stdio, verb string, quiet bool) *slog.Logger {
	level := slog.LevelInfo
	if quiet {
		level = slog.LevelWarn
	}
	if io.verbose {
		level = slog.LevelDebug
	}
	return slog.New(&lineHandler{w: io.err, prefix: "lockstep " + verb + ": ", level: level, mu: &sync.Mutex{},
		progress: progressPrefix(verb), start: time.Now()})
}

// progressPrefix starts every progress line of verb, and only those: what
// the terminal display recognises, in a guest's output too.
func progressPrefix(verb string) string { return "lockstep " + verb + " [" }

// withProgressDisplay returns io with stderr shown as a one-line progress
// display when it is a terminal (and -v is off), and the function that ends
// the display; otherwise io itself.
func withProgressDisplay(io *stdio, verb string) (*stdio, func()) {
	if !io.errTTY || io.verbose {
		return io, func() {}
	}
	width := 80
	if f, ok := io.err.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 1 {
			width = w
		}
	}
	d := &lineDisplay{w: io.err, progress: progressPrefix(verb), width: width}
	c := *io
	c.err = d
	return &c, d.end
}

// lineDisplay writes lines to a terminal: a progress line (one that starts
// with progress) replaces the one before it, cut to the terminal's width;
// any other line is kept, the progress line it follows erased first. It
// takes writes of any size, from several goroutines (a guest's stderr and
// the verb's own logger).
type lineDisplay struct {
	w        io.Writer
	progress string
	width    int

	mu      sync.Mutex
	partial []byte
	showing bool // a progress line is on the screen, without a newline
}

// eraseLine returns to the start of the line and clears it (ANSI: CR, EL).
const eraseLine = "\r\x1b[K"

func (d *lineDisplay) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.partial = append(d.partial, p...)
	for {
		i := bytes.IndexByte(d.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(d.partial[:i])
		d.partial = d.partial[i+1:]
		if err := d.line(line); err != nil {
			return len(p), err
		}
	}
}

func (d *lineDisplay) line(line string) error {
	var b strings.Builder
	if d.showing {
		b.WriteString(eraseLine)
	}
	d.showing = strings.HasPrefix(line, d.progress)
	if d.showing {
		b.WriteString(cut(line, d.width-1))
	} else {
		b.WriteString(line + "\n")
	}
	_, err := io.WriteString(d.w, b.String())
	return err
}

// end erases the last progress line and writes out a partial line left.
func (d *lineDisplay) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.showing {
		io.WriteString(d.w, eraseLine)
		d.showing = false
	}
	if len(d.partial) > 0 {
		d.w.Write(append(d.partial, '\n'))
		d.partial = nil
	}
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
