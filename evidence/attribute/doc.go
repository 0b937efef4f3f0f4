// Package attribute decides, for each failed call of a trace, whether it is
// a refusal that a policy could lift, and what the policy would have to
// grant: the layer that refused it, and the sections, Landlock rights and
// objects (paths, or port and transport) it proves a need for.
//
// # What counts
//
// Only failed calls of threads inside a Landlock domain are considered
// ([strace.Call.InDomain]); successes only update what later calls need
// (each thread's working directory, the type of each socket). A refusal is
// an EACCES, EPERM or EXDEV; a resource error is a limit hit: EMFILE on a
// call that makes a descriptor (nofile), EAGAIN from clone/fork (nproc),
// ENOMEM from mmap/brk/clone (mem_mb), EFBIG from a write (fsize_mb).
// Every other error is ordinary program behaviour and no refusal.
//
// # Layers
//
//   - [Filesystem] and [Network]: Landlock's, and grantable after the
//     control replay (package control) confirms the access succeeds outside
//     every sandbox.
//   - [Fixed]: refused by a rule no policy lifts (setsid, setpgid, socket
//     creation, mknod of a device, a device ioctl other than the
//     pseudo-terminal requests, a connect to a non-INET, non-UNIX family).
//   - [Limit]: a resource limit.
//   - [Other]: not Landlock's. EPERM is always here: Landlock refuses file
//     and network access with EACCES (EXDEV for a missing refer right), so
//     EPERM (scopes, ptrace, mounts, capabilities) never becomes a grant.
//     So is an EACCES from a call no Landlock right governs (access(2),
//     stat, chmod, listen …) and a path that cannot be resolved. So is,
//     by default, a refusal inside a domain the command stacked on ours
//     (its own rules may have refused; see Options.NestedDomains).
//
// # Where a need is charged
//
// Which rights a system call needs, and on which of its arguments, is
// landlock.Syscalls; the sections are the ones landlock.Rights says grant
// each right. This package reads the arguments and the flags and the
// object's kind that decide between them.
//
// Creating and deleting are charged to the parent directory, a rename to
// the parents of both names ([restructure] on both for EXDEV, else
// [delete] on the source's and [create] on the destination's), a link to
// the destination's parent, an execve to the binary ([execute] and [read];
// package control adds the interpreter). An open states its intent, so one
// run can reveal a follow-up right as well: O_CREAT of a file that does not
// exist needs [create] on the parent and the access mode's right on the new
// file; O_TRUNC needs [write] (write_file and truncate). A pathname UNIX
// socket needs [create-ipc] on its parent to bind and [read]
// (fs.resolve_unix, ABI 9+) to connect. A connect or send on a UDP socket
// that was never bound also needs `[bind] allow 0 udp` (ABI 10 checks the
// autobind), so both are listed; minimisation drops the one not needed.
//
// Relative paths are resolved against the call's -y directory annotation
// (`AT_FDCWD</work>`, `3</dir>`) or the thread's last known working
// directory; `/proc/self` and `/proc/thread-self` become the refusing
// process's own entries. Paths are lexically cleaned, not resolved through
// symlinks unless [Options.Resolve] says how ([ResolveSymlinks] names what
// Landlock sees, which a changeable section must name).
package attribute
