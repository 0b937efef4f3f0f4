package cli

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// Display writes lines to a terminal: a progress line (one that starts
// with its progress prefix) replaces the one before it, cut to the
// terminal's width; any other line is kept, the progress line it follows
// erased first. It takes writes of any size, from several goroutines (a
// guest's stderr and the verb's own logger).
type Display struct {
	w        io.Writer
	progress string
	width    int

	mu      sync.Mutex
	partial []byte
	showing bool // a progress line is on the screen, without a newline
}

// EraseLine returns to the start of the line and clears it (ANSI: CR, EL).
const EraseLine = "\r\x1b[K"

// NewDisplay is a Display on w of verb's progress lines, width columns
// wide; width 0 asks w's terminal, else 80.
func NewDisplay(w io.Writer, verb string, width int) *Display {
	if width <= 0 {
		width = 80
		if f, ok := w.(*os.File); ok {
			if tw, _, err := term.GetSize(int(f.Fd())); err == nil && tw > 1 {
				width = tw
			}
		}
	}
	return &Display{w: w, progress: ProgressPrefix(verb), width: width}
}

func (d *Display) Write(p []byte) (int, error) {
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

func (d *Display) line(line string) error {
	var b strings.Builder
	if d.showing {
		b.WriteString(EraseLine)
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

// End erases the last progress line and writes out a partial line left.
func (d *Display) End() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.showing {
		io.WriteString(d.w, EraseLine)
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
