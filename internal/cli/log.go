package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Level is the level of a verb's logger: from quiet, lowered to progress
// (info) when stderr is a terminal, and to everything (debug) with -v.
func Level(quiet slog.Level, terminal, verbose bool) slog.Level {
	level := quiet
	if terminal && level > slog.LevelInfo {
		level = slog.LevelInfo
	}
	if verbose {
		level = slog.LevelDebug
	}
	return level
}

// Logger writes "<prefix><msg> k=v …" lines to w, records at level and
// above; warnings and errors carry "warn: " or "error: " after the prefix.
func Logger(w io.Writer, prefix string, level slog.Level) *slog.Logger {
	return slog.New(&lineHandler{w: w, prefix: prefix, level: level, mu: &sync.Mutex{}})
}

// ProgressLogger is Logger for a verb that shows its progress: its info
// records are progress lines, "lockstep <verb> [<elapsed>] <msg>", every
// other record a line "lockstep <verb>: …".
func ProgressLogger(w io.Writer, verb string, level slog.Level) *slog.Logger {
	return slog.New(&lineHandler{w: w, prefix: "lockstep " + verb + ": ", level: level, mu: &sync.Mutex{},
		progress: ProgressPrefix(verb), start: time.Now()})
}

// ProgressPrefix starts every progress line of verb, and only those: what
// the terminal display recognises, in a guest's output too.
func ProgressPrefix(verb string) string { return "lockstep " + verb + " [" }

// lineHandler writes "<prefix><msg> k=v …" lines.
type lineHandler struct {
	w      io.Writer
	prefix string
	level  slog.Level
	mu     *sync.Mutex
	attrs  []slog.Attr
	// progress, when set, starts info lines instead of prefix, followed by
	// the time since start (ProgressLogger).
	progress string
	start    time.Time
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	switch {
	case h.progress != "" && r.Level == slog.LevelInfo:
		b.WriteString(h.progress + time.Since(h.start).Round(time.Second).String() + "] ")
	default:
		b.WriteString(h.prefix)
	}
	if r.Level >= slog.LevelWarn {
		b.WriteString(strings.ToLower(r.Level.String()) + ": ")
	}
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		v := a.Value.String()
		if strings.ContainsAny(v, " \t\"") {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &c
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }

// Plural is "1 warning", "2 warnings": the count and a noun whose plural
// takes an s, as every summary line of the verbs writes them.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
