package main

// Exit statuses, as docs/exit-codes.md lists them. A verb that
// meets several failures keeps the most severe. record generate's own
// statuses are recorder.StatusCreatedRead (4), StatusRefused (5) and
// StatusIncomplete (6).
const (
	exitOK            = 0
	exitFail          = 1   // a check failed, problems found, an exercise failed
	exitUsage         = 2   // the command line was wrong
	exitIndeterminate = 3   // nothing trustworthy was observed (also: kernel config unfit)
	exitGuestSetup    = 70  // the guest could not be set up
	exitTimeout       = 124 // the policy's timeout ended the command
	exitRefused       = 125 // the policy or the kernel refused; nothing ran
	exitCannotExec    = 126 // the command exists but cannot be executed
	exitNotFound      = 127 // the command does not exist
	exitCapPassed     = 137 // a resource cap was passed (killed)
)
