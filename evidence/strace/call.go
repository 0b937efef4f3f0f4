package strace

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind says what a [Call] records.
type Kind uint8

// The kinds of event a trace holds.
const (
	// Syscall is a system call, joined from its halves if strace split it.
	Syscall Kind = iota
	// Signal is a delivered signal (`--- SIGCHLD {…} ---`); Name holds the
	// signal, Detail the siginfo text between the braces, or the whole text
	// for other `---` lines (`--- stopped by SIGTSTP ---`).
	Signal
	// Exit is `+++ exited with N +++`; Status holds N.
	Exit
	// Killed is `+++ killed by SIGX [(core dumped)] +++`; Name holds the signal.
	Killed
	// Superseded is `+++ superseded by execve in pid N +++`: thread N
	// executed a program and took over this pid; Status holds N.
	Superseded
)

var kindNames = [...]string{"syscall", "signal", "exit", "killed", "superseded"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Call is one event of one thread.
type Call struct {
	Kind Kind
	// Line is the 1-based line of the event in the input; for a joined
	// call, the line of its first half.
	Line int
	// PID is the thread id strace printed (0 when the trace has no pids).
	PID int
	// TGID is the thread group (process) the thread belonged to, as far as
	// the trace shows it: a thread created with CLONE_THREAD joins its
	// creator's group, anything else starts its own.
	TGID int
	// Name is the system call's name (Syscall), or the signal (Signal,
	// Killed).
	Name string
	// Args are the call's top-level arguments as printed.
	Args []Arg
	// Ret is the return value as printed, with its -y annotation
	// (`3</etc/passwd>`), or "?" for a call that did not return; empty for
	// an unfinished call and for other kinds.
	Ret string
	// Errno is the error name (`EACCES`, `ERESTARTSYS`) of a failed call,
	// ErrnoText the text strace gave with it.
	Errno, ErrnoText string
	// Detail is any further text: the `(…)` strace printed after the result
	// (`(flags O_RDWR)`, `(Timeout)`), a signal's siginfo, `core dumped`.
	Detail string
	// Status is the exit status (Exit) or the old pid (Superseded).
	Status int
	// Joined is true when the call was printed in two halves.
	Joined bool
	// Unfinished is true when the call never returned in the trace (the
	// thread died inside it, or the trace ended).
	Unfinished bool
	// InDomain reports whether the thread was inside a Landlock domain when
	// the call started; Depth is the number of domains it was inside.
	InDomain bool
	Depth    int
}

// Failed reports whether the call returned an error.
func (c *Call) Failed() bool { return c.Errno != "" }

// Result returns the numeric return value (decimal or 0x hexadecimal,
// without its annotation); ok is false for "?" and for unfinished calls.
func (c *Call) Result() (v int64, ok bool) {
	r := c.Ret
	if i := strings.IndexByte(r, '<'); i >= 0 {
		r = r[:i]
	}
	return parseInt(r)
}

// RetFD returns the descriptor a call returned with its annotation
// (`3</path>`); ok is false when the result is not one.
func (c *Call) RetFD() (FD, bool) { return Arg(c.Ret).FD() }

// String renders the call roughly as strace printed it (joined halves are
// shown as one line).
func (c *Call) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ", c.PID)
	switch c.Kind {
	case Signal:
		fmt.Fprintf(&b, "--- %s %s ---", c.Name, c.Detail)
		return b.String()
	case Exit:
		fmt.Fprintf(&b, "+++ exited with %d +++", c.Status)
		return b.String()
	case Killed:
		fmt.Fprintf(&b, "+++ killed by %s +++", c.Name)
		return b.String()
	case Superseded:
		fmt.Fprintf(&b, "+++ superseded by execve in pid %d +++", c.Status)
		return b.String()
	}
	b.WriteString(c.Name)
	b.WriteByte('(')
	for i, a := range c.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(a))
	}
	if c.Unfinished {
		b.WriteString(" <unfinished ...>")
		return b.String()
	}
	b.WriteString(") = ")
	b.WriteString(c.Ret)
	if c.Errno != "" {
		fmt.Fprintf(&b, " %s (%s)", c.Errno, c.ErrnoText)
	} else if c.Detail != "" {
		fmt.Fprintf(&b, " (%s)", c.Detail)
	}
	return b.String()
}

// parseInt reads a decimal (possibly negative) or 0x-hexadecimal integer.
func parseInt(s string) (int64, bool) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		u, err := strconv.ParseUint(s[2:], 16, 64)
		return int64(u), err == nil
	}
	if s == "" {
		return 0, false
	}
	neg := false
	i := 0
	if s[0] == '-' {
		neg, i = true, 1
		if len(s) == 1 {
			return 0, false
		}
	}
	var v int64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<63-1)/10 {
			u, err := strconv.ParseInt(s, 10, 64)
			return u, err == nil
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}
