// Package lazyre holds regular expressions that compile on first use.
//
// Every package-level regexp.MustCompile runs at program start, in every
// verb: `lockstep run -- true` paid for the exercise, record, kernel and
// image validators it never calls (about 0.5 ms of its start-up, measured
// with GODEBUG=inittrace=1). The same idea as the go command's
// internal/lazyregexp. In a test binary the expression compiles at once,
// so a bad one still fails the package's tests rather than a later call.
package lazyre
