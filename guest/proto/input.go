package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// InputPort is the virtio-serial port name of the host-to-guest input
// stream: a user's keystrokes and window sizes for an interactive session
// (harness.Options.Input). Only the job that asks for it opens it.
const InputPort = "lockstep.input"

// Kinds of input message.
const (
	// InputData carries bytes typed on the host's terminal, as they were
	// typed (raw mode: ^C is the byte 3, for the guest's line discipline).
	InputData byte = 'd'
	// InputWindow carries the host terminal's new size: rows, then
	// columns, each a big-endian uint16.
	InputWindow byte = 'w'
)

// MaxInputData bounds one data message's payload.
const MaxInputData = 4096

// InputMsg is one message of the input stream. The wire form is the kind
// byte, a big-endian uint16 payload length, then the payload.
type InputMsg struct {
	Kind byte
	Data []byte
	// Rows and Cols are an InputWindow's size.
	Rows, Cols uint16
}

// WriteInputData writes b as data messages of at most MaxInputData bytes.
func WriteInputData(w io.Writer, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), MaxInputData)
		if err := writeInput(w, InputData, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// WriteInputWindow writes a window-size message.
func WriteInputWindow(w io.Writer, rows, cols uint16) error {
	var p [4]byte
	binary.BigEndian.PutUint16(p[0:], rows)
	binary.BigEndian.PutUint16(p[2:], cols)
	return writeInput(w, InputWindow, p[:])
}

func writeInput(w io.Writer, kind byte, p []byte) error {
	msg := make([]byte, 3, 3+len(p))
	msg[0] = kind
	binary.BigEndian.PutUint16(msg[1:], uint16(len(p)))
	_, err := w.Write(append(msg, p...))
	return err
}

// ReadInput reads the next message; io.EOF at a clean end between messages,
// an error naming the problem for a message cut short or malformed (an
// unknown kind, a data message over MaxInputData, a window message that is
// not 4 bytes or sizes 0).
func ReadInput(r io.Reader) (InputMsg, error) {
	var h [3]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return InputMsg{}, fmt.Errorf("input message header cut short: %w", err)
		}
		return InputMsg{}, err
	}
	n := int(binary.BigEndian.Uint16(h[1:]))
	m := InputMsg{Kind: h[0]}
	switch {
	case m.Kind == InputData && n > MaxInputData:
		return m, fmt.Errorf("input data message of %d bytes: want at most %d", n, MaxInputData)
	case m.Kind == InputWindow && n != 4:
		return m, fmt.Errorf("window message of %d bytes: want 4", n)
	case m.Kind != InputData && m.Kind != InputWindow:
		return m, fmt.Errorf("input message kind %q: want %q or %q", m.Kind, InputData, InputWindow)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return m, fmt.Errorf("input message payload cut short: %w", io.ErrUnexpectedEOF)
	}
	if m.Kind == InputData {
		m.Data = p
		return m, nil
	}
	m.Rows, m.Cols = binary.BigEndian.Uint16(p[0:]), binary.BigEndian.Uint16(p[2:])
	if m.Rows == 0 || m.Cols == 0 {
		return m, fmt.Errorf("window size %dx%d: want both above 0", m.Rows, m.Cols)
	}
	return m, nil
}
