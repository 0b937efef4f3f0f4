package harness

import (
	"fmt"
	"io"
)

// WriteFailure writes what there is to see of a guest that did not report
// trustworthily, each line starting with prefix: the console's tail (its
// last 20 lines unless verbose), where the forensics were saved and, with
// replay, the QEMU command line that boots it again.
func (r *Result) WriteFailure(w io.Writer, prefix string, verbose, replay bool) {
	tail := r.ConsoleTail
	if !verbose && len(tail) > 20 {
		tail = tail[len(tail)-20:]
	}
	if len(tail) > 0 {
		WriteConsole(w, prefix, tail)
	}
	if r.ForensicsFile != "" {
		fmt.Fprintf(w, "%sforensics saved in %s\n", prefix, r.ForensicsFile)
	}
	if replay {
		fmt.Fprintf(w, "%sto replay the boot: %s\n", prefix, r.QEMUCommand)
	}
}

// WriteConsole writes lines of a guest's console, after a line with
// prefix saying how many.
func WriteConsole(w io.Writer, prefix string, lines []string) {
	fmt.Fprintf(w, "%sguest console, last %d lines:\n", prefix, len(lines))
	for _, l := range lines {
		fmt.Fprintf(w, "  | %s\n", l)
	}
}
