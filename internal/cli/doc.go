// Package cli is what the command line's verbs share beyond their own
// flags: the verb table (Verbs: registering, parsing a command line, help,
// bash completion), the exit statuses, the flag values that refuse an
// empty or repeated value, the signals that end a verb (a context whose
// cause names the signal), the lines a verb logs ("lockstep <verb>: …",
// progress lines with the time since the verb began) and the one-line
// progress display a terminal gets.
package cli
