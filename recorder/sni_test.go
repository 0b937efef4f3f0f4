package recorder

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// clientHello is the first record crypto/tls's client writes for
// serverName (no server name extension for an address or "").
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		tc.Handshake()
		c.Close()
	}()
	buf := make([]byte, 16<<10)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestServerName(t *testing.T) {
	hello := clientHello(t, "Api.Example.TEST")
	if name, err := ServerName(hello); err != nil || name != "api.example.test" {
		t.Errorf("ServerName(crypto/tls's hello) = %q, %v; want api.example.test", name, err)
	}
	if name, err := ServerName(clientHello(t, "192.0.2.9")); err != nil || name != "" {
		t.Errorf("a hello for an address (no server name) = %q, %v; want none", name, err)
	}
	if _, err := ServerName(hello[:60]); err == nil {
		t.Error("a hello cut before its extensions was read whole")
	}
	if _, err := ServerName([]byte("GET / HTTP/1.1\r\n")); !errors.Is(err, ErrNotClientHello) {
		t.Errorf("plain HTTP: %v, want ErrNotClientHello", err)
	}
	for _, bad := range []string{"a..b", "1.2.3.4", "x y", strings.Repeat("a", 64) + ".test"} {
		if _, err := checkServerName(bad); err == nil {
			t.Errorf("server name %q accepted", bad)
		}
	}
}

func FuzzServerName(f *testing.F) {
	f.Add(clientHello(f, "api.example.test"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := ServerName(b)
		if err != nil && name != "" {
			t.Fatalf("a name %q with an error %v", name, err)
		}
		if name != "" {
			if again, err := checkServerName(name); err != nil || again != name {
				t.Fatalf("returned name %q does not check: %v", name, err)
			}
		}
	})
}

// A real trace (testdata/tls, capture.sh made it): Python's ssl module
// connects to 192.0.2.2:4433 and writes its ClientHello for
// Api.Example.TEST. The session's connect carries the name, and generate
// grants it by name with the resolver line in the header.
func TestSessionTLSTrace(t *testing.T) {
	_, uses, _, err := judgeExisted(filepath.Join("testdata", "tls", "trace"), "", &StartState{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var connect *Use
	for i, u := range uses {
		if u.Op == "connect" {
			connect = &uses[i]
		}
	}
	if connect == nil || len(connect.Net) != 1 || connect.Net[0].Name != "api.example.test" || connect.Net[0].Port != 4433 {
		t.Fatalf("the connect %+v: want one to port 4433 named api.example.test", connect)
	}
	g, err := Generate(writeRecording(t, session(*connect)), GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(g.Policy.Render())
	for _, want := range []string{"[connect]\n# the server name of the TLS ClientHello a session sent to 192.0.2.2\nallow api.example.test:4433\n", "needs a resolver"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the policy lacks %q:\n%s", want, cfg)
		}
	}
	if len(g.Record.ServerNames) != 1 {
		t.Errorf("record.json's server names %q, want one", g.Record.ServerNames)
	}
}

// A real trace of less (testdata/less, capture.py made it): the terminal
// it opened again (descriptor 3) gets requests strace names ambiguously
// ("SNDCTL_TMR_STOP or TCSETSW"); each is the pseudo-terminal's TCSETSW,
// a grantable ioctl_dev need, so the session is not INCOMPLETE.
func TestSessionLessTrace(t *testing.T) {
	_, uses, dropped, err := judgeExisted(filepath.Join("testdata", "less", "trace"), "/dev/pts/0", &StartState{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tcsetsw := 0
	for _, u := range uses {
		if u.Op != "ioctl" {
			continue
		}
		if !u.grantable() {
			t.Errorf("ungrantable ioctl: %s (%s)", u.Call, u.Reason)
		}
		if strings.Contains(u.Call, "TCSETSW") {
			tcsetsw++
		}
	}
	if tcsetsw != 2 || dropped == 0 {
		t.Errorf("%d TCSETSW uses (want 2), %d ioctls on descriptors 0-2 dropped (want some)", tcsetsw, dropped)
	}
}

// straceQuote renders b as strace prints a buffer (octal escapes but for
// printable ASCII, '"' and '\\' escaped), with '}' and ',' left as they
// are: they must not end a structure or a field inside the literal.
func straceQuote(b []byte) string {
	var s strings.Builder
	s.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			s.WriteString(`\` + string(c))
		case c >= 0x20 && c < 0x7f:
			s.WriteByte(c)
		default:
			fmt.Fprintf(&s, `\%03o`, c) // three digits: a digit may follow
		}
	}
	return s.String() + `"`
}

// A ClientHello written with write or sendmsg (its first iovec) names the
// socket's connect; one on another socket, or written second, does not.
func TestServerNamesCalls(t *testing.T) {
	hello := append(clientHello(t, "api.example.test"), "}, {iov_base=\"x\""...)
	q := straceQuote(hello)
	trace := `7 connect(3<socket:[11]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("192.0.2.7")}, 16) = 0
7 sendmsg(3<socket:[11]>, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base=` + q + `, iov_len=` + strconv.Itoa(len(hello)) + `}, {iov_base="", iov_len=0}], msg_iovlen=2, msg_controllen=0, msg_flags=0}, 0) = ` + strconv.Itoa(len(hello)) + `
7 connect(4<socket:[12]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("192.0.2.8")}, 16) = 0
7 write(4<socket:[12]>, "GET / HTTP/1.1\r\n", 16) = 16
7 write(4<socket:[12]>, ` + q + `, ` + strconv.Itoa(len(hello)) + `) = ` + strconv.Itoa(len(hello)) + `
`
	var calls []*strace.Call
	if _, err := strace.Parse(strings.NewReader(trace), func(c *strace.Call) error { calls = append(calls, c); return nil }); err != nil {
		t.Fatal(err)
	}
	got := serverNames(calls)
	if len(got) != 1 || got[11] != "api.example.test" {
		t.Errorf("serverNames = %v, want only socket 11 named api.example.test", got)
	}
}
