package attribute

import (
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Uses attributes every call of a trace that succeeded as though it had
// been refused: what a policy must grant for the call to succeed under
// Landlock. It is the recording pruner's view of an unsandboxed run, with
// the pruner's own mapping from calls to rights. Calls no Landlock right
// governs give nothing; socket creation and the process-group calls, which
// fixed rules refuse whatever a policy says, give nothing either (they
// succeed under lockstep run as they did unsandboxed, or not at all).
// Options.Lstat should answer from the state before the run, so an
// O_CREAT open of a file the run created counts as a create.
func Uses(calls []*strace.Call, opts Options) []*Refusal {
	a := New(opts)
	var out []*Refusal
	for _, c := range calls {
		a.track(c)
		if c.Kind != strace.Syscall || c.Failed() && !connectStarted(c) || c.Unfinished {
			continue
		}
		if r := a.use(c); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// connectStarted reports a non-blocking connect that Landlock let through:
// EINPROGRESS (the handshake goes on after the call), where a refusal is
// EACCES.
func connectStarted(c *strace.Call) bool {
	return c.Name == "connect" && c.Errno == "EINPROGRESS"
}

// devIoctl reports whether an ioctl is one Landlock's ioctl_dev right
// governs: on a device file, and not one of the requests every file
// answers (FIOCLEX, FIONCLEX, FIONBIO, FIOASYNC, FIOQSIZE), which Landlock
// always allows.
func devIoctl(c *strace.Call) bool {
	switch string(argAt(c, 1)) {
	case "FIOCLEX", "FIONCLEX", "FIONBIO", "FIOASYNC", "FIOQSIZE":
		return false
	}
	fd, ok := argFD(c, 0)
	return ok && strings.HasPrefix(fd.Path, "/dev/")
}

// use is Observe's attribution of one successful call.
func (a *Attributor) use(c *strace.Call) *Refusal {
	switch c.Name {
	case "setsid", "setpgid", "socket", "socketpair":
		return nil
	}
	if _, ok := landlock.Syscalls[c.Name]; !ok || c.Name == "ioctl" && !devIoctl(c) {
		return nil
	}
	r := a.refusal(c)
	r.Call = c
	if r.Op == "" {
		r.Op = c.Name
	}
	if r.Layer == Other && r.Reason == reasonOPath {
		return nil
	}
	return a.complete(r)
}

// complete is the last step of every attribution: no port (-1) when no
// network right is in it, and for a file system refusal its paths resolved
// (Options.Resolve) and summarised.
func (a *Attributor) complete(r *Refusal) *Refusal {
	if r.Port == 0 && len(r.Net) == 0 {
		r.Port = -1
	}
	if r.Layer == Filesystem {
		if a.opts.Resolve != nil {
			for i := range r.Needs {
				r.Needs[i].Path = a.opts.Resolve(r.Needs[i].Path)
			}
		}
		r.summarise()
	}
	return r
}
