// Package machine gathers what this machine offers lockstep: the Landlock ABI
// and errata, the LSM list, the kernel audit subsystem, /dev/kvm, QEMU and
// strace versions, cgroups and Yama's ptrace scope. It only reads: nothing is
// registered, mounted or changed. `lockstep probe` prints it.
//
// Every fact has three outcomes, as everywhere in lockstep: known yes, known
// no, and unknown, the last with its Error field set (never read as "no").
package machine
