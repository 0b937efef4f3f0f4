// Package shellquote renders arguments as words a POSIX shell reads back
// unchanged: the command lines lockstep logs and records (QEMU's in
// run.json and the forensics file, the kernel build's and the image
// build's commands) are meant to be pasted. One function and one set of
// safe bytes, where the harness, the kernel builder and the image builder
// each had their own.
//
// mvdan.cc/sh/v3/syntax.Quote (already a test dependency) was not taken: for
// the POSIX variant it refuses a newline, a control byte or a byte that is
// not UTF-8 ("POSIX shell lacks escape sequences", v3.11.0), all of which
// single quotes carry, and it would bring the shell parser into the one
// binary every guest and every enforced command starts.
package shellquote
