package auditnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	libaudit "github.com/elastic/go-libaudit/v2"
	"golang.org/x/sys/unix"
)

// Conn is an audit netlink socket in Go's poller, for go-libaudit's
// AuditClient (NewClient). A blocking Receive waits in the kernel, with no
// wake-up until a message arrives, and SetReadDeadline interrupts it.
//
// go-libaudit's own socket blocks in recvfrom, which nothing interrupts
// (elastic/go-libaudit#105), so a reader that must stop had to poll it; the
// collector's 2 ms poll woke the guest's vCPU 500 times a second for the
// whole observation and slowed the exercise's runs beside it by about 45 %
// under TCG (CHANGELOG.md, 2026-12-02).
type Conn struct {
	f   *os.File
	rc  syscall.RawConn
	pid uint32
	seq atomic.Uint32
	buf []byte
}

// Dial opens an audit netlink socket (no multicast group) in Go's poller.
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("audit netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("audit netlink socket: bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	nl, ok := sa.(*unix.SockaddrNetlink)
	if err != nil || !ok {
		unix.Close(fd)
		return nil, fmt.Errorf("audit netlink socket: its port id: %v", err)
	}
	// A non-blocking descriptor makes os.NewFile register it with the poller.
	f := os.NewFile(uintptr(fd), "audit-netlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit netlink socket: %w", err)
	}
	return &Conn{f: f, rc: rc, pid: nl.Pid, buf: make([]byte, unix.NLMSG_HDRLEN+libaudit.AuditMessageMaxLength)}, nil
}

// NewClient is go-libaudit's AuditClient on a Conn, and the Conn.
func NewClient() (*libaudit.AuditClient, *Conn, error) {
	c, err := Dial()
	if err != nil {
		return nil, nil, err
	}
	return &libaudit.AuditClient{Netlink: c}, c, nil
}

// Send sends msg to the kernel, waiting while the socket's buffer is full,
// and returns its sequence number.
func (c *Conn) Send(msg syscall.NetlinkMessage) (uint32, error) { return c.send(msg, false) }

// SendNoWait is Send that fails with EAGAIN instead of waiting.
func (c *Conn) SendNoWait(msg syscall.NetlinkMessage) (uint32, error) { return c.send(msg, true) }

func (c *Conn) send(msg syscall.NetlinkMessage, noWait bool) (uint32, error) {
	if msg.Header.Pid == 0 {
		msg.Header.Pid = c.pid
	}
	msg.Header.Seq = c.seq.Add(1)
	msg.Header.Len = uint32(unix.NLMSG_HDRLEN + len(msg.Data))
	b := make([]byte, msg.Header.Len)
	binary.NativeEndian.PutUint32(b[0:], msg.Header.Len)
	binary.NativeEndian.PutUint16(b[4:], msg.Header.Type)
	binary.NativeEndian.PutUint16(b[6:], msg.Header.Flags)
	binary.NativeEndian.PutUint32(b[8:], msg.Header.Seq)
	binary.NativeEndian.PutUint32(b[12:], msg.Header.Pid)
	copy(b[unix.NLMSG_HDRLEN:], msg.Data)
	var serr error
	err := c.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return noWait || !errors.Is(serr, unix.EAGAIN)
	})
	if err == nil {
		err = serr
	}
	return msg.Header.Seq, err
}

// Receive reads one datagram from the kernel and parses it with p. With
// nonBlocking it returns EAGAIN at once when nothing is queued; otherwise it
// waits in the poller until a datagram arrives, the read deadline passes
// (os.ErrDeadlineExceeded) or the Conn is closed (os.ErrClosed).
func (c *Conn) Receive(nonBlocking bool, p libaudit.NetlinkParser) ([]syscall.NetlinkMessage, error) {
	var n int
	var from unix.Sockaddr
	var rerr error
	err := c.rc.Read(func(fd uintptr) bool {
		n, from, rerr = unix.Recvfrom(int(fd), c.buf, 0)
		return nonBlocking || !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	if n < unix.NLMSG_HDRLEN {
		return nil, fmt.Errorf("audit netlink socket: %d bytes received, less than a netlink header", n)
	}
	if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
		return nil, errors.New("audit netlink socket: a message that is not from the kernel")
	}
	return p(c.buf[:n])
}

// SetReadDeadline makes a waiting or later Receive return
// os.ErrDeadlineExceeded once t has passed; the zero time waits again.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.f.SetReadDeadline(t) }

// Close closes the socket; a waiting Receive returns os.ErrClosed.
func (c *Conn) Close() error { return c.f.Close() }
