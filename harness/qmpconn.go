package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// qmpConn is a QMP client (a qmp.Monitor) that reads QEMU's answers on the
// caller's goroutine: Run writes one command and reads lines up to its
// answer, skipping events, so the answer is the caller's own bytes.
// go-qemu's SocketMonitor hands the caller a slice of its reader
// goroutine's scanner buffer, which the next line QEMU sends (an event)
// overwrites while the caller decodes it: a data race, seen by the race
// detector in TestGuestFailures' forensics.
type qmpConn struct {
	c net.Conn
	r *bufio.Reader
}

// dialQMPConn connects to QEMU's QMP socket at path.
func dialQMPConn(path string, timeout time.Duration) (*qmpConn, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, err
	}
	return &qmpConn{c: c, r: bufio.NewReader(c)}, nil
}

// Connect reads QEMU's greeting and does the capabilities handshake.
func (q *qmpConn) Connect() error {
	if _, err := q.answer(true); err != nil {
		return err
	}
	_, err := q.Run([]byte(`{"execute":"qmp_capabilities"}`))
	return err
}

// Disconnect closes the socket, which also ends a Run blocked on it.
func (q *qmpConn) Disconnect() error { return q.c.Close() }

// Events is not offered: the harness reads no QMP event.
func (q *qmpConn) Events(context.Context) (<-chan qmp.Event, error) {
	return nil, errors.New("qmp: events are not read")
}

// Run sends one command and returns its answer, or the error QEMU gave.
func (q *qmpConn) Run(command []byte) ([]byte, error) {
	if _, err := q.c.Write(command); err != nil {
		return nil, err
	}
	return q.answer(false)
}

// answer reads lines up to the greeting (greeting) or the next answer,
// skipping events and lines that are not JSON objects.
func (q *qmpConn) answer(greeting bool) ([]byte, error) {
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var m struct {
			Event string          `json:"event"`
			QMP   json.RawMessage `json:"QMP"`
			Error *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil || m.Event != "" {
			continue
		}
		switch {
		case greeting && m.QMP == nil:
			return nil, fmt.Errorf("qmp: want the greeting, got %q", line)
		case m.Error != nil:
			return nil, fmt.Errorf("qmp: %s: %s", m.Error.Class, m.Error.Desc)
		}
		return line, nil
	}
}
