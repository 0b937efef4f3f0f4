package auditnl

import (
	"encoding/binary"
	"os"
	"syscall"
	"testing"

	libaudit "github.com/elastic/go-libaudit/v2"
)

// TestStatusOf: the reply is picked by its sequence number among a late
// reply to an earlier request and a record; a refusal is an error; nothing
// for the request yet is no answer.
func TestStatusOf(t *testing.T) {
	status := func(seq uint32, pid uint32) syscall.NetlinkMessage {
		data := make([]byte, 64)
		binary.LittleEndian.PutUint32(data[0:], 0x1) // mask
		binary.LittleEndian.PutUint32(data[4:], 1)   // enabled
		binary.LittleEndian.PutUint32(data[12:], pid)
		return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: libaudit.AuditGet, Seq: seq}, Data: data}
	}
	record := syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: 1400, Seq: 0}, Data: []byte("audit(1.0:1): x")}
	st, err, ok := statusOf([]syscall.NetlinkMessage{status(6, 11), record, status(7, 42)}, 7)
	if !ok || err != nil || st.PID != 42 || st.Enabled != 1 {
		t.Errorf("statusOf = %+v, %v, %v; want seq 7's status (pid 42)", st, err, ok)
	}
	if _, _, ok := statusOf([]syscall.NetlinkMessage{status(6, 11), record}, 7); ok {
		t.Error("statusOf without seq 7's reply answered")
	}
	refusal := syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: syscall.NLMSG_ERROR, Seq: 7}, Data: make([]byte, 20)}
	eperm := -int32(syscall.EPERM)
	binary.LittleEndian.PutUint32(refusal.Data, uint32(eperm))
	if _, err, ok := statusOf([]syscall.NetlinkMessage{refusal}, 7); !ok || err == nil {
		t.Errorf("statusOf of a refusal = %v, %v; want an error", err, ok)
	}
}

// TestStatusHostKernel asks this machine's kernel: the answer agrees with
// go-libaudit's own query on the fields that do not move.
func TestStatusHostKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("AUDIT_GET needs root (CAP_AUDIT_CONTROL)")
	}
	c, err := libaudit.NewAuditClient(nil)
	if err != nil {
		t.Skipf("no audit netlink socket: %v", err)
	}
	defer c.Close()
	st, err := Status(c, 0)
	if err != nil {
		t.Fatalf("Status = %v", err)
	}
	again, err := Status(c, 0)
	if err != nil {
		t.Fatalf("second Status on the same socket = %v", err)
	}
	if st.Enabled != again.Enabled || st.BacklogLimit != again.BacklogLimit || st.RateLimit != again.RateLimit {
		t.Errorf("Status = %+v then %+v; want the same settings", st, again)
	}
	if st.Enabled > 2 || st.BacklogLimit == 0 {
		t.Errorf("Status = %+v; want a kernel's audit status", st)
	}
}
