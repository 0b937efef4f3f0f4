// Command lockstep runs Landlock policies on pinned Linux kernels inside
// throwaway QEMU guests and checks, call by call, that what strace attributes
// to Landlock is what the kernel's own audit records say.
//
// One static binary plays both roles: run as PID 1 it is the guest's init,
// anywhere else it is the host command line. See docs/cli.md for every verb.
package main
