// Package proctest finds what a test's run left running: the processes
// `sleep <token>`, the daemon a hostile script starts with setsid to outlive
// the run that should contain it, named by a token of the test's own. Only
// tests import it.
package proctest
