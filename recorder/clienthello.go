package recorder

import (
	"errors"
	"fmt"
	"strings"
)

// TLS constants the ClientHello parser reads (RFC 8446 §4.1.2, RFC 6066 §3).
const (
	tlsHandshake      = 0x16 // record content type
	tlsClientHello    = 1    // handshake message type
	tlsExtServerName  = 0    // extension type
	tlsServerHostName = 0    // server name type
)

// ErrNotClientHello is a buffer that does not start a TLS ClientHello.
var ErrNotClientHello = errors.New("not a TLS ClientHello")

// ServerName returns the host name of the server_name extension of the
// TLS ClientHello that b starts with (a TLS record as a client writes it to
// its socket). b may be cut short (strace's -s limit): what it holds is
// read, and a name that lies past the cut is not found. It returns "" and
// no error for a whole ClientHello without a server name,
// ErrNotClientHello for a buffer that is not one, and an error naming the
// problem for a malformed one or a name that is not a DNS name.
func ServerName(b []byte) (string, error) {
	if len(b) < 6 || b[0] != tlsHandshake || b[1] != 3 || b[5] != tlsClientHello {
		return "", ErrNotClientHello
	}
	r := reader{b: b[5:]} // past the record header
	r.skip(4)             // handshake type and length
	r.skip(2 + 32)        // legacy_version, random
	r.skip(int(r.u8()))   // legacy_session_id
	r.skip(int(r.u16()))  // cipher_suites
	r.skip(int(r.u8()))   // legacy_compression_methods
	ext := reader{b: r.bytes(int(r.u16()))}
	if r.err != nil {
		return "", r.err
	}
	for len(ext.b) > 0 && ext.err == nil {
		typ, data := ext.u16(), ext.bytes(int(ext.u16()))
		if typ == tlsExtServerName && ext.err == nil {
			return hostName(data)
		}
	}
	if ext.err != nil {
		return "", ext.err
	}
	return "", nil
}

// hostName reads the host_name entry of a server_name extension's list.
func hostName(data []byte) (string, error) {
	r := reader{b: data}
	list := reader{b: r.bytes(int(r.u16()))}
	for len(list.b) > 0 && list.err == nil && r.err == nil {
		typ, name := list.u8(), list.bytes(int(list.u16()))
		if typ == tlsServerHostName && list.err == nil {
			return checkServerName(string(name))
		}
	}
	if err := errors.Join(r.err, list.err); err != nil {
		return "", err
	}
	return "", errors.New("a server_name extension without a host_name")
}

// checkServerName lower-cases a host name and refuses one that is not a
// DNS name a [connect] row can carry (RFC 6066: no trailing dot, no
// address literal).
func checkServerName(n string) (string, error) {
	n = strings.ToLower(n)
	if n == "" || len(n) > 253 {
		return "", fmt.Errorf("server name of %d bytes: want 1 to 253", len(n))
	}
	digitsOnly := true
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("server name %q: a label of %d bytes, want 1 to 63", n, len(label))
		}
		for _, c := range label {
			switch {
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				digitsOnly = false
			case c >= '0' && c <= '9':
			default:
				return "", fmt.Errorf("server name %q: byte %q, want letters, digits, - and _", n, c)
			}
		}
	}
	if digitsOnly {
		return "", fmt.Errorf("server name %q looks like an address", n)
	}
	return n, nil
}

// reader reads big-endian fields; past the end of b it sets err (a buffer
// cut short) and returns zeros.
type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("ClientHello cut short: a field of %d bytes, %d left", n, len(r.b))
		r.b = nil
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) skip(n int) { r.bytes(n) }

func (r *reader) u8() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return uint16(b[0])<<8 | uint16(b[1])
	}
	return 0
}
