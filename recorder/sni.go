package recorder

import (
	"errors"

	"github.com/lockstep-sandbox/lockstep/pruner/strace"
)

// serverNames maps each socket (by its inode, from strace's -y
// annotation) whose first data written is a TLS ClientHello to the server
// name it carries: write, send and sendto calls, their buffer as strace
// printed it (-s 4096 holds a ClientHello's server name, which comes
// early). A ClientHello sent with sendmsg (its buffer inside msg_iov) is
// not read: such a connection stays held by address.
func serverNames(calls []*strace.Call) map[uint64]string {
	out := map[uint64]string{}
	seen := map[uint64]bool{}
	for _, c := range calls {
		if c.Kind != strace.Syscall || c.Failed() || c.Unfinished || len(c.Args) < 2 {
			continue
		}
		if c.Name != "write" && c.Name != "send" && c.Name != "sendto" {
			continue
		}
		fd, ok := c.Args[0].FD()
		if !ok || fd.Inode == 0 || fd.Path != "" || seen[fd.Inode] {
			continue
		}
		buf, _, err := strace.Unquote(string(c.Args[1]))
		if err != nil || buf == "" {
			continue
		}
		seen[fd.Inode] = true
		if name, err := ServerName([]byte(buf)); err == nil && name != "" {
			out[fd.Inode] = name
		} else if err != nil && !errors.Is(err, ErrNotClientHello) {
			continue // a malformed hello names nothing
		}
	}
	return out
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
