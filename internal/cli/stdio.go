package cli

import "log/slog"

// ProgressLog is the logger of a verb that shows its progress by default:
// a line per stage and run, "lockstep <verb> [<elapsed>] <msg>", besides
// the warnings ("lockstep <verb>: warning: …"); quiet (-q) leaves only the
// warnings, -v adds every external command. Where stderr is a terminal,
// WithDisplay turns the progress lines into one line that rewrites itself.
func (io *Stdio) ProgressLog(verb string, quiet bool) *slog.Logger {
	level := slog.LevelInfo
	if quiet {
		level = slog.LevelWarn
	}
	return ProgressLogger(io.Err, verb, Level(level, false, io.Verbose))
}

// WithDisplay returns io with stderr shown as a one-line progress display
// when it is a terminal (and -v is off), and the function that ends the
// display; otherwise io itself.
func (io *Stdio) WithDisplay(verb string) (*Stdio, func()) {
	if !io.ErrTTY || io.Verbose {
		return io, func() {}
	}
	d := NewDisplay(io.Err, verb, 0)
	c := *io
	c.Err = d
	return &c, d.End
}

// VerbLog writes "lockstep <verb>: <msg> k=v …" lines to stderr: records
// at quiet and above always, progress (info) when stderr is a terminal,
// and everything with -v.
func (io *Stdio) VerbLog(verb string, quiet slog.Level) *slog.Logger {
	return Logger(io.Err, "lockstep "+verb+": ", Level(quiet, io.ErrTTY, io.Verbose))
}

// GuestLog is the logger of a verb that boots guests: warnings always,
// progress on a terminal, everything with -v; lines name the verb.
func (io *Stdio) GuestLog(verb string) *slog.Logger { return io.VerbLog(verb, slog.LevelWarn) }
