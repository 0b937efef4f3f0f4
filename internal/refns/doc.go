// Package refns runs an exercise's reference run (the one run with no
// sandbox, as root) so that it cannot change what the program that started
// it reads or writes afterwards, nor outlive its run.
//
// The starting program clones the run with SysProcAttr: a user namespace
// that maps every id to itself (0 0 4294967295: root keeps its power over
// files, CAP_DAC_OVERRIDE included, but has no capability toward the
// starting program's namespaces, so it cannot ptrace it, load a module or
// remount what it holds), and mount, PID, IPC and UTS namespaces of its own.
// The clone executes this program as the role Verb (`<program> ref-run
// --read-only P… --writable W… -- <command>…`), through a descriptor opened before any run
// (Exec), never by a path a run could have replaced. As PID 1 of the new
// PID namespace the role (Serve) mounts a fresh /proc, makes the kernel's
// tunables (/proc/sys and its siblings, /sys), the system's programs,
// libraries and loader configuration (/etc, /usr, /bin, /sbin, /lib…:
// what the starter runs outside any sandbox afterwards, strace) and every
// --read-only path read-only (but each --writable path below them), gives the run a /dev of its own (the harmless character
// devices, a private devpts and /dev/shm; no disk), and runs the command
// as its child in a user namespace nested in its own (every id mapped to
// itself again) with a mount namespace of that one's, where every one of
// those mounts is locked: the run, root there with every capability, can
// neither unmount them nor make them writable. When the command ends the
// role exits with its status, and the kernel kills whatever else the run
// started (a setsid daemon included): a PID namespace dies with its init.
package refns
