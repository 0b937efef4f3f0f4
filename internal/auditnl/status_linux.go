package auditnl

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	libaudit "github.com/elastic/go-libaudit/v2"
)

// StatusTimeout is how long Status waits for the kernel's reply by default.
const StatusTimeout = 30 * time.Second

// Status asks the kernel for its audit status on c and waits up to timeout
// (0: StatusTimeout) for the reply with the request's sequence number,
// skipping anything else that arrives first (a late reply to an earlier
// request, records on a daemon's socket).
//
// go-libaudit's GetStatus gives the reply 500 ms, but the kernel sends it
// from a kernel thread it starts for each reply (audit_send_reply), so on a
// loaded machine it comes later: "failed to get audit status reply: no reply
// received" failed the proof's host test in a CI run at load 12.
func Status(c *libaudit.AuditClient, timeout time.Duration) (*libaudit.AuditStatus, error) {
	if timeout <= 0 {
		timeout = StatusTimeout
	}
	seq, err := c.GetStatusAsync(false)
	if err != nil {
		return nil, fmt.Errorf("send AUDIT_GET: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		msgs, err := c.Netlink.Receive(true, ParseOne)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("no reply to AUDIT_GET in %v", timeout)
			}
			time.Sleep(5 * time.Millisecond)
			continue
		case err != nil:
			return nil, fmt.Errorf("read the reply to AUDIT_GET: %w", err)
		}
		if st, err, ok := statusOf(msgs, seq); ok {
			return st, err
		}
	}
}

// statusOf finds the reply to request seq among msgs: the status, or the
// kernel's refusal of the request.
func statusOf(msgs []syscall.NetlinkMessage, seq uint32) (*libaudit.AuditStatus, error, bool) {
	for _, m := range msgs {
		if m.Header.Seq != seq {
			continue
		}
		switch m.Header.Type {
		case syscall.NLMSG_ERROR:
			if err := libaudit.ParseNetlinkError(m.Data); err != nil {
				return nil, fmt.Errorf("AUDIT_GET refused: %w", err), true
			}
		case libaudit.AuditGet:
			st := &libaudit.AuditStatus{}
			if err := st.FromWireFormat(m.Data); err != nil {
				return nil, fmt.Errorf("read the audit status: %w", err), true
			}
			return st, nil, true
		}
	}
	return nil, nil, false
}

// ParseOne reads one audit netlink message from buf. Audit messages are one
// to a datagram, and the kernel's length field is not always right for
// them, so the message is the whole datagram after its header.
func ParseOne(buf []byte) ([]syscall.NetlinkMessage, error) {
	if len(buf) < syscall.NLMSG_HDRLEN {
		return nil, syscall.EINVAL
	}
	var h syscall.NlMsghdr
	h.Len = le32(buf[0:4])
	h.Type = uint16(le32(buf[4:8]) & 0xffff)
	h.Flags = uint16(le32(buf[4:8]) >> 16)
	h.Seq = le32(buf[8:12])
	h.Pid = le32(buf[12:16])
	return []syscall.NetlinkMessage{{Header: h, Data: buf[syscall.NLMSG_HDRLEN:]}}, nil
}

// le32 reads a little-endian uint32 (every architecture lockstep's guests
// run is little-endian).
func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
