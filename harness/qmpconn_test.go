package harness

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQMPConn talks to a QMP server on a real socket that sends events
// before and right after each answer: the greeting and the handshake, an
// answer returned whole and unchanged by the event after it, and QEMU's
// error as an error.
func TestQMPConn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qmp.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		c.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
		for {
			// Commands arrive without a newline: read one JSON object.
			var b []byte
			depth := 0
			for {
				ch, err := r.ReadByte()
				if err != nil {
					return
				}
				b = append(b, ch)
				if ch == '{' {
					depth++
				} else if ch == '}' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			event := `{"event": "STOP", "timestamp": {"seconds": 1, "microseconds": 2}}` + "\n"
			switch {
			case strings.Contains(string(b), "qmp_capabilities"):
				c.Write([]byte(`{"return": {}}` + "\n"))
			case strings.Contains(string(b), "query-status"):
				c.Write([]byte(event + `{"return": {"status": "running", "running": true}}` + "\n" + event))
			default:
				c.Write([]byte(`{"error": {"class": "CommandNotFound", "desc": "The command nope has not been found"}}` + "\n"))
			}
		}
	}()
	q, err := dialQMPConn(path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := &monitor{mon: q, timeout: 5 * time.Second}
	if err := m.call("connect", q.Connect); err != nil {
		t.Fatalf("Connect = %v", err)
	}
	for i := 0; i < 3; i++ {
		if st, err := m.status(); err != nil || st != "running" {
			t.Fatalf("status() = %q, %v; want running", st, err)
		}
	}
	if _, err := m.run("nope", nil); err == nil || !strings.Contains(err.Error(), "CommandNotFound") {
		t.Errorf("an unknown command = %v, want QEMU's CommandNotFound", err)
	}
	if err := q.Disconnect(); err != nil {
		t.Error(err)
	}
}
