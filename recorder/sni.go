package recorder

import (
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// serverNames maps each socket (by its inode, from strace's -y
// annotation) whose first data written is a TLS ClientHello to the server
// name it carries: write, send and sendto calls and sendmsg's first
// msg_iov buffer, as strace printed them (-s 4096 holds a ClientHello's
// server name, which comes early).
func serverNames(calls []*strace.Call) map[uint64]string {
	out := map[uint64]string{}
	seen := map[uint64]bool{}
	for _, c := range calls {
		if c.Kind != strace.Syscall || c.Failed() || c.Unfinished || len(c.Args) < 2 {
			continue
		}
		lit, ok := sentBuffer(c)
		if !ok {
			continue
		}
		fd, ok := c.Args[0].FD()
		if !ok || fd.Inode == 0 || fd.Path != "" || seen[fd.Inode] {
			continue
		}
		buf, _, err := strace.Unquote(string(lit))
		if err != nil || buf == "" {
			continue
		}
		seen[fd.Inode] = true
		// Not a ClientHello, or a malformed one: it names nothing.
		if name, err := ServerName([]byte(buf)); err == nil && name != "" {
			out[fd.Inode] = name
		}
	}
	return out
}

// sentBuffer is the string literal of the data a call writes: write's,
// send's and sendto's second argument, sendmsg's first iov_base.
func sentBuffer(c *strace.Call) (strace.Arg, bool) {
	switch c.Name {
	case "write", "send", "sendto":
		return c.Args[1], true
	case "sendmsg":
		iov, ok := c.Args[1].Field("msg_iov")
		lit, found := strings.CutPrefix(strings.TrimSpace(string(iov)), `[{iov_base="`)
		if !ok || !found {
			return "", false
		}
		return strace.QuotedPrefix(`"` + lit)
	}
	return "", false
}

// connectInode is the socket inode of a connect call's descriptor, 0 when
// it has none.
func connectInode(c *strace.Call) uint64 {
	if c == nil || c.Name != "connect" || len(c.Args) == 0 {
		return 0
	}
	fd, ok := c.Args[0].FD()
	if !ok {
		return 0
	}
	return fd.Inode
}
