package nsexec

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// Exec locks the calling goroutine to its thread, calls enter (which moves
// that thread into namespaces of its own and changes its directory), and
// executes argv in place of the process from that thread, so the run's
// process is the command's and a signal to its process group reaches it.
// It returns only on failure, with status, having said why on stderr as
// "lockstep <verb>: …" (hint follows enter's error when set).
func Exec(verb string, status int, enter func() error, hint string, argv []string, stderr io.Writer) int {
	runtime.LockOSThread()
	if err := enter(); err != nil {
		if hint != "" {
			fmt.Fprintf(stderr, "lockstep %s: %v; %s\n", verb, err, hint)
		} else {
			fmt.Fprintf(stderr, "lockstep %s: %v\n", verb, err)
		}
		return status
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "lockstep %s: %v\n", verb, err)
		return status
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(stderr, "lockstep %s: executing %s: %v\n", verb, path, err)
	return status
}
