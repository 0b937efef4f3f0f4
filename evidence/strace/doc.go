// Package strace parses the output of
//
//	strace -f -qq -y -s 4096 -e trace=%file,%network,%process,%desc,landlock_restrict_self,setsid,setpgid,ioctl -o FILE
//
// (the command lockstep's pruner runs a command under; the observer's,
// [SeccompCommand], traces fewer calls in the same format) into calls, and
// tracks which threads are inside a Landlock domain.
//
// # Lines
//
// Every line is one event of one thread: a system call
// (`1234 openat(AT_FDCWD</w>, "a", O_RDONLY) = -1 EACCES (Permission denied)`),
// a signal (`1234 --- SIGCHLD {si_signo=SIGCHLD, …} ---`) or the end of a
// thread (`1234 +++ exited with 0 +++`, `+++ killed by SIGKILL +++`,
// `+++ superseded by execve in pid 1236 +++`). The pid prefix may also be
// strace's `[pid 1234]` form, or absent (then PID is 0). A call interrupted by
// another thread's output is printed in two halves, `<unfinished ...>` (or
// `<pid changed to N ...>` across a multi-threaded execve) and
// `<... name resumed>`; the parser joins them into one [Call]. A half whose
// other half never comes is reported ([Call.Unfinished]) or counted
// ([Stats.Orphans]). A line strace began for one call and then used for
// another event (`4686  ???(4686  +++ superseded by execve in pid 4690 +++`)
// is split in two.
//
// Arguments are kept as raw text ([Arg]) split at top-level commas, with
// helpers for what the pruner needs: quoted strings with strace's C escapes
// ([Unquote], [Quote]), descriptors with their `-y` annotation
// (`3</path>`, `AT_FDCWD</cwd>`, `5<socket:[123]>`, `5<TCP:[…]>`), flag
// sets (`O_WRONLY|O_CREAT`, strace 6.1's unknown constants such as
// `0x2 /* LANDLOCK_RULE_??? */`) and socket addresses ([SockAddr]).
//
// # The Landlock domain
//
// A thread enters a domain with its own successful
// landlock_restrict_self (with LANDLOCK_RESTRICT_SELF_TSYNC, every thread of
// its thread group does; with ruleset fd -1 nothing is entered). A thread or
// process created afterwards by clone, clone3, fork or vfork inherits its
// creator's domain, and a thread that replaces its group leader by execve
// keeps its own. [Call.InDomain] and [Call.Depth] give the state the call ran
// in. Because strace can print a child's first calls before its creator's
// clone returns, the parser holds calls back while a clone-family call is
// still unfinished and releases them, in file order, once the child's creator
// is known; nothing else is reordered, so memory stays bounded by the lines
// printed during one unfinished clone.
//
// # Errors
//
// A line that fits none of the forms is a [*SyntaxError]; [Parser.Next]
// returns it and parsing may continue with the next line. An error never
// comes with a call.
package strace
