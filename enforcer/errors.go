package enforcer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// Sentinel errors. Run returns an error that Is one of them, with the exit
// status docs/exit-codes.md gives it; Status maps any error to that status.
var (
	// ErrRefused: nothing ran, because the policy, the command line or
	// the kernel refused (exit 125). Every error below with status 125 Is it.
	ErrRefused = errors.New("refused; nothing ran")
	// ErrUnenforceable: a rule this kernel's Landlock cannot enforce, or a
	// rule that cannot be applied to the paths here (exit 125).
	ErrUnenforceable = fmt.Errorf("policy unenforceable on this kernel: %w", ErrRefused)
	// ErrHashMismatch: --expect-hash named another policy (exit 125).
	ErrHashMismatch = fmt.Errorf("policy hash mismatch: %w", ErrRefused)
	// ErrNotFound: the command does not exist (exit 127).
	ErrNotFound = errors.New("command not found")
	// ErrCannotExec: the command exists but cannot be executed (exit 126).
	ErrCannotExec = errors.New("cannot execute")
	// ErrTimeout: the policy's timeout passed; the process group was
	// killed (exit 124).
	ErrTimeout = errors.New("timeout passed")
	// ErrInterrupted: the context was cancelled (Ctrl-C); the process
	// group was killed (exit 130).
	ErrInterrupted = errors.New("interrupted")
	// ErrCapPassed: a cgroup cap (processes, memory) was passed and
	// everything the command started was killed (exit 137).
	ErrCapPassed = errors.New("resource cap passed")
)

// Exit statuses of the enforcer (docs/exit-codes.md).
const (
	StatusTimeout    = 124
	StatusRefused    = 125
	StatusCannotExec = 126
	StatusNotFound   = 127
	StatusInterrupt  = 130
	StatusCapPassed  = 137
)

// Status returns the exit status for an error Run returned (0 for nil).
func Status(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrTimeout):
		return StatusTimeout
	case errors.Is(err, ErrCapPassed):
		return StatusCapPassed
	case errors.Is(err, ErrInterrupted):
		return StatusInterrupt
	case errors.Is(err, ErrNotFound):
		return StatusNotFound
	case errors.Is(err, ErrCannotExec):
		return StatusCannotExec
	default:
		return StatusRefused
	}
}

// UnenforceableError lists every rule that stopped a policy from being
// applied. Error() is one line; Problems holds each rule's own line.
type UnenforceableError struct {
	Problems []string
}

func (e *UnenforceableError) Error() string {
	if len(e.Problems) == 1 {
		return "policy unenforceable: " + e.Problems[0] + "; nothing ran"
	}
	return fmt.Sprintf("policy unenforceable (%d rules): %s; nothing ran", len(e.Problems), strings.Join(e.Problems, "; "))
}

// Is makes an UnenforceableError match ErrUnenforceable and ErrRefused.
func (e *UnenforceableError) Is(target error) bool {
	return target == ErrUnenforceable || target == ErrRefused
}

// statusError is an error with its own message whose class is a sentinel.
type statusError struct {
	msg  string
	kind error
}

func (e *statusError) Error() string { return e.msg }
func (e *statusError) Unwrap() error { return e.kind }

func errorf(kind error, format string, a ...any) error {
	return &statusError{msg: fmt.Sprintf(format, a...), kind: kind}
}

// RefusalPrefix starts every line `lockstep run` prints of its own: the
// pruner (verdict.Stopped) tells the enforcer's refusal from the command's
// exit status by it.
const RefusalPrefix = "lockstep run: "

// WriteRefusal writes why the enforcer stopped, as `lockstep run` does: a
// line per policy problem or unenforceable rule and a closing line, or err
// itself; each line starts with RefusalPrefix.
func WriteRefusal(w io.Writer, err error) {
	var el policy.ErrorList
	var ue *UnenforceableError
	switch {
	case errors.As(err, &el):
		for _, e := range el {
			fmt.Fprintf(w, "%s%v\n", RefusalPrefix, e)
		}
		fmt.Fprintf(w, "%s%d policy problems. Nothing ran.\n", RefusalPrefix, len(el))
	case errors.As(err, &ue):
		for _, pr := range ue.Problems {
			fmt.Fprintf(w, "%sunenforceable: %s\n", RefusalPrefix, pr)
		}
		fmt.Fprintf(w, "%srefused. Nothing ran.\n", RefusalPrefix)
	default:
		fmt.Fprintf(w, "%s%v\n", RefusalPrefix, err)
	}
}

// Signals are the signals on which lockstep run (and the pruner's enforcer
// role) kills the command and its cgroup, removes the cgroup and exits
// 128+n. Uncaught, SIGHUP ended lockstep at once and SIGQUIT dumped its
// goroutines, both leaving the command running and its cgroup behind, and
// an exercise runner's SIGTERM at a timeout ended the enforcer alone.
var Signals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM}
