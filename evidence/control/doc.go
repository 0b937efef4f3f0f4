// Package control replays a candidate refusal outside every sandbox: only
// an access that succeeds there can have been refused by Landlock, so only
// such a refusal may become a grant. A refusal the replay cannot repeat
// (the file lacks an execute bit, the directory is on a read-only mount,
// the port is privileged, the object is gone) was somebody else's.
//
// # How each need is replayed
//
// The replay runs in the calling process, which must be outside every
// Landlock domain (the pruner is: it starts the sandboxed command as a
// child), with the same uid as the refusing command. Paths are resolved
// through symlinks first, then opened with O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC,
// so nothing blocks, follows a link swapped in meanwhile, or leaks.
//
//   - [read]: a directory is opened O_RDONLY|O_DIRECTORY, a regular file
//     O_RDONLY; a device, FIFO or socket is only checked with
//     faccessat(R_OK, AT_EACCESS) (opening one has side effects); a
//     pathname socket being connected to (fs.resolve_unix) with W_OK.
//   - [write]: a regular file is opened O_WRONLY, never truncated or
//     created; anything else is checked with faccessat(W_OK). A file the
//     refused open would have created is replayed as a create in its
//     directory.
//   - [execute]: a regular file with an execute bit that faccessat(X_OK)
//     accepts.
//   - [create] (make_reg): a temporary file `.lockstep-control-*` is created
//     in the nearest existing directory and removed at once (make_dir: a
//     temporary directory). With Options.NoCreate, or for every other
//     section ([delete], [create-symlink], [create-ipc], [restructure]),
//     faccessat(W_OK|X_OK) on that directory, which changes nothing.
//   - [restructure] (EXDEV): additionally both parents must be on one
//     device, or the EXDEV was a real cross-device move.
//   - [ioctl]: only with Options.PseudoTerminals, and only the requests a
//     fresh openpty pair can repeat (TIOCGPTN, TIOCSPTLCK on the master;
//     TCGETS, TCSETS, TCSETSW, TCSETSF, TIOCGWINSZ, TIOCSWINSZ on the
//     slave, each set writing back what it read).
//   - [bind]: a socket of the same family and transport is bound to the
//     loopback address at the port and closed; only EACCES (a privileged
//     port) counts against, port 0 always passes.
//   - [connect]: a UDP socket is connected to the address and port (no
//     packet is sent); only EACCES counts against.
//
// The refusing process's own /proc entries (`/proc/<pid>/…`,
// `/proc/<pid>/task/<tid>/…`) are replayed on /proc/self and
// /proc/thread-self, a descriptor under fd/ or fdinfo/ as that directory; a
// vanished /dev/pts/N of a pseudo-terminal exercise as /dev/pts/ptmx.
//
// Layers other than filesystem and network are never replayed and never
// Landlock's.
package control
