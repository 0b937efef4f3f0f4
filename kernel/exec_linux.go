package kernel

import "syscall"

// sysProcAttr puts a child in its own process group, so cancelling stops
// make and its compilers together, and asks the kernel to send it SIGTERM
// if lockstep dies without cancelling (SIGKILL), so no build runs on
// orphaned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
