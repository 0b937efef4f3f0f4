package attribute

import (
	"path"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// network attributes connect, send and bind: the call's network right on
// an INET socket, its filesystem right on a pathname UNIX socket.
func (a *Attributor) network(c *strace.Call, call landlock.Syscall) *Refusal {
	sa, ok := argAt(c, call.Addr).SockAddr()
	if !ok {
		return other("%s without a destination address is not a Landlock refusal", c.Name)
	}
	switch sa.Family {
	case "AF_UNIX":
		return a.unixSocket(c, call, sa)
	case "AF_INET", "AF_INET6":
	default:
		return fixed(c.Name, "%s to family %s is refused by a fixed rule", c.Name, sa.Family)
	}
	if sa.Port < 0 {
		return other("%s to %s without a port", c.Name, sa.Family)
	}
	sock, _, known := a.socket(c)
	tr := sock.transport
	if !known || tr == "" {
		tr = policy.TCP
		if strings.HasPrefix(c.Name, "send") {
			tr = policy.UDP
		}
	}
	right := call.TCP
	if tr == policy.UDP {
		right = call.UDP
	}
	r := &Refusal{Layer: Network, Op: c.Name, Detail: sa.Family,
		Reason: "Landlock governs this port; grantable once the control replay succeeds"}
	r.Net = []NetNeed{{Section: policy.Section(right.Section()), Addr: sa.Addr, Port: sa.Port, Transport: tr, Right: right}}
	if right == landlock.ConnectSendUDP && !sock.bound {
		// ABI 10 checks the autobind of an unbound UDP socket as a
		// bind to port 0 before the destination.
		r.Net = append(r.Net, NetNeed{Section: policy.Section(landlock.BindUDP.Section()), Port: 0, Transport: policy.UDP, Right: landlock.BindUDP})
	}
	r.Addr, r.Port, r.Transport = r.Net[0].Addr, r.Net[0].Port, r.Net[0].Transport
	for _, n := range r.Net {
		r.Rights = uniqRights(append(r.Rights, n.Right))
		r.Sections = sortSections(append(r.Sections, n.Section)...)
	}
	return r
}

// unixSocket attributes a bind to, or a connect or send to, a UNIX socket:
// the call's filesystem right on the socket file (or its parent, to bind).
func (a *Attributor) unixSocket(c *strace.Call, call landlock.Syscall, sa strace.SockAddr) *Refusal {
	if sa.Abstract || sa.Path == "" {
		return other("an abstract or unnamed UNIX socket is scoped (EPERM), never granted")
	}
	p := sa.Path
	if !strings.HasPrefix(p, "/") {
		d := a.cwd[c.PID]
		if d == "" {
			return other("cannot resolve the relative UNIX socket path")
		}
		p = d + "/" + p
	}
	p = path.Clean(p)
	op := "connect"
	if call.Object == landlock.Parent {
		p, op = path.Dir(p), "create"
	}
	r := fsRefusal(op, NewNeed(p, call.Rights...))
	r.Detail = "AF_UNIX"
	return r
}

// socket finds what is known of the socket in a call's first argument.
func (a *Attributor) socket(c *strace.Call) (sockInfo, uint64, bool) {
	if len(c.Args) == 0 {
		return sockInfo{}, 0, false
	}
	fd, ok := c.Args[0].FD()
	if !ok {
		return sockInfo{}, 0, false
	}
	var s sockInfo
	found := false
	if fd.Inode != 0 {
		s, found = a.sockets[fd.Inode]
	}
	if !found {
		s, found = a.fdSock[[2]int{c.TGID, fd.Num}]
	}
	// -yy names the protocol itself.
	switch strings.TrimSuffix(fd.Proto, "v6") {
	case "TCP":
		s.transport, found = policy.TCP, true
	case "UDP", "UDPLITE":
		s.transport, found = policy.UDP, true
	}
	return s, fd.Inode, found
}

func (a *Attributor) store(inode uint64, c *strace.Call, s sockInfo) {
	if inode != 0 {
		a.sockets[inode] = s
	}
	if fd, ok := c.Args[0].FD(); ok {
		a.fdSock[[2]int{c.TGID, fd.Num}] = s
	}
}

type sockInfo struct {
	family    string
	transport policy.Transport
	bound     bool
}
