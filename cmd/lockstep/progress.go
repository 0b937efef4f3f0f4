package main

import (
	"log/slog"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
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
	return cli.ProgressLogger(io.err, verb, cli.Level(level, false, io.verbose))
}

// withProgressDisplay returns io with stderr shown as a one-line progress
// display when it is a terminal (and -v is off), and the function that ends
// the display; otherwise io itself.
func withProgressDisplay(io *stdio, verb string) (*stdio, func()) {
	if !io.errTTY || io.verbose {
		return io, func() {}
	}
	d := cli.NewDisplay(io.err, verb, 0)
	c := *io
	c.err = d
	return &c, d.End
}
