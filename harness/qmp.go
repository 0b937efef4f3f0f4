package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
)

// qmpTimeout bounds every QMP call: a call has no deadline of its own and
// blocks forever on a wedged QEMU.
const qmpTimeout = 3 * time.Second

// errQMPTimeout marks a QMP call that did not answer in time.
var errQMPTimeout = errors.New("qmp: no answer")

// monitor wraps a QMP monitor with a deadline on every call. After a
// call times out the monitor is disconnected and every later call fails.
type monitor struct {
	mon     qmp.Monitor
	timeout time.Duration
	broken  error
}

// dialQMP waits until QEMU has made its QMP socket, connects and does the
// capabilities handshake, all within timeout.
func dialQMP(path string, timeout time.Duration) (*monitor, error) {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("qmp: socket %s did not appear in %v", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sm, err := dialQMPConn(path, time.Until(deadline))
	if err != nil {
		return nil, fmt.Errorf("qmp: dial %s: %w", path, err)
	}
	m := &monitor{mon: sm, timeout: timeout}
	if err := m.call("connect", sm.Connect); err != nil {
		return nil, err
	}
	return m, nil
}

// call runs f with the monitor's deadline; on expiry the monitor is
// disconnected, which unblocks f.
func (m *monitor) call(what string, f func() error) error {
	if m.broken != nil {
		return fmt.Errorf("qmp %s: monitor unusable after: %w", what, m.broken)
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(m.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("qmp %s: %w", what, err)
		}
		return nil
	case <-t.C:
		m.broken = fmt.Errorf("%w to %s in %v", errQMPTimeout, what, m.timeout)
		m.mon.Disconnect()
		<-done
		return m.broken
	}
}

// run executes one QMP command and returns its "return" member.
func (m *monitor) run(cmd string, args any) (json.RawMessage, error) {
	raw, err := json.Marshal(qmp.Command{Execute: cmd, Args: args})
	if err != nil {
		return nil, err
	}
	var out []byte
	if err := m.call(cmd, func() error {
		var err error
		out, err = m.mon.Run(raw)
		return err
	}); err != nil {
		return nil, err
	}
	var r struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("qmp %s: decode %q: %w", cmd, out, err)
	}
	return r.Return, nil
}

// status returns query-status's run state ("running", "guest-panicked", …).
func (m *monitor) status() (string, error) {
	ret, err := m.run("query-status", nil)
	if err != nil {
		return "", err
	}
	var s struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ret, &s); err != nil {
		return "", fmt.Errorf("qmp query-status: decode %s: %w", ret, err)
	}
	return s.Status, nil
}

// hmp runs a human monitor command (such as "info registers").
func (m *monitor) hmp(line string) (string, error) {
	ret, err := m.run("human-monitor-command", map[string]string{"command-line": line})
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(ret, &s); err != nil {
		return "", fmt.Errorf("qmp hmp %q: decode %s: %w", line, ret, err)
	}
	return s, nil
}

func (m *monitor) quit() error {
	_, err := m.run("quit", nil)
	return err
}

func (m *monitor) close() {
	if m.broken == nil {
		m.call("disconnect", m.mon.Disconnect)
	}
}

// forensics gathers what a hung guest leaves to look at: the run state,
// every vCPU's registers and the console's last lines. Each part that
// cannot be had says why instead.
func forensics(m *monitor, reason string, argv []string, consoleTail []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lockstep forensics\nreason: %s\ntime: %s\nqemu: %s\n\n", reason, time.Now().UTC().Format(time.RFC3339), shellquote.Join(argv))
	if m == nil {
		b.WriteString("query-status: no QMP connection\n\ninfo registers: no QMP connection\n\n")
	} else {
		if st, err := m.status(); err != nil {
			fmt.Fprintf(&b, "query-status: %v\n\n", err)
		} else {
			fmt.Fprintf(&b, "query-status: %s\n\n", st)
		}
		if regs, err := m.hmp("info registers -a"); err != nil {
			fmt.Fprintf(&b, "info registers: %v\n\n", err)
		} else {
			fmt.Fprintf(&b, "info registers -a:\n%s\n", strings.ReplaceAll(regs, "\r", ""))
		}
	}
	fmt.Fprintf(&b, "console, last %d lines:\n", len(consoleTail))
	for _, l := range consoleTail {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
