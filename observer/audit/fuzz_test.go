package audit

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// capturedLines returns the lines of a real capture file of every capture
// directory, as fuzz seeds.
func capturedLines(f *testing.F, name string) []string {
	var lines []string
	for _, dir := range captureDirs {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	return lines
}

var seedBodies = []string{
	`audit(1791373582.204:4): domain=1bf4c9339 blockers=fs.read_file path="/etc/hostname" dev="vda" ino=177`,
	`audit(1791373582.204:4): domain=1bf4c9339 status=allocated mode=enforcing pid=451 uid=0 exe="/x" comm="phobos-landlock"`,
	`audit(1791373582.219:5): domain=1bf4c9339 status=deallocated denials=1`,
	`audit(1759830000.105:45): domain=195ba459b blockers=fs.read_file path=2F7372762F776974682073706163652F66696C65 dev="vda" ino=2212`,
	`audit(1759830000.106:46): domain=195ba459b blockers=fs.ioctl_dev path="/dev/null" dev="devtmpfs" ino=5 ioctlcmd=0x5401`,
	`audit(1791375760.016:59): domain=119fe767d blockers=net.bind_udp saddr=127.0.0.1 src=5000`,
	`audit(1.000:9): domain=1 blockers=net.connect_send_udp laddr=::1 lport=5000 daddr=::1 dest=53`,
	`audit(1.000:9): domain=1 blockers=scope.signal opid=1 ocomm="systemd"`,
	`audit(1.000:9): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c ppid=1 pid=2 comm="x" exe=2F61 key=(null)`,
	`audit(1.000:9): this line is damaged`,
}

// checkRecord holds (form 0: any line form) the invariants every parse result must keep.
func checkRecord(t *testing.T, in string, r Record, err error, form Form) {
	t.Helper()
	if err != nil {
		if !reflect.DeepEqual(r, Record{}) {
			t.Fatalf("parse(%q) returned %+v with error %v", in, r, err)
		}
		return
	}
	if form == 0 && (r.Form == FormNetlink || r.Form == 0) || form != 0 && r.Form != form {
		t.Fatalf("parse(%q).Form = %v, want %v", in, r.Form, form)
	}
	back, err := ParseNetlink(uint16(r.Type), []byte(r.Body()))
	if err != nil {
		t.Fatalf("ParseNetlink(Body()) of %q = %v (body %q)", in, err, r.Body())
	}
	if back.Type != r.Type || back.Serial != r.Serial || back.Sec != r.Sec || back.Milli != r.Milli || !reflect.DeepEqual(back.Fields(), r.Fields()) {
		t.Fatalf("round trip of %q: %+v, want %+v", in, back, r)
	}
	// Typed views must never panic; an error leaves the zero value.
	if a, err := r.Access(); err != nil && !reflect.DeepEqual(a, Access{}) {
		t.Fatalf("Access() of %q = %+v with error %v", in, a, err)
	}
	if d, err := r.Domain(); err != nil && d != (DomainStatus{}) {
		t.Fatalf("Domain() of %q = %+v with error %v", in, d, err)
	}
	if s, err := r.Syscall(); err != nil && s != (Syscall{}) {
		t.Fatalf("Syscall() of %q = %+v with error %v", in, s, err)
	}
}

func FuzzParseNetlink(f *testing.F) {
	for _, b := range seedBodies {
		f.Add(uint16(1423), []byte(b))
		f.Add(uint16(1300), []byte(b+"\x00"))
	}
	for _, l := range capturedLines(f, "netlink.txt") {
		typ, body, _ := strings.Cut(l, " ")
		t, _ := parseTypeName(typ)
		f.Add(uint16(t), []byte(body))
	}
	f.Fuzz(func(t *testing.T, typ uint16, data []byte) {
		r, err := ParseNetlink(typ, data)
		checkRecord(t, string(data), r, err, FormNetlink)
		if err == nil && r.Type != Type(typ) {
			t.Fatalf("type %d, want %d", r.Type, typ)
		}
	})
}

func fuzzLine(f *testing.F, capture string, prefix func(body string) string) {
	for _, b := range seedBodies {
		f.Add(prefix(b))
	}
	for _, l := range capturedLines(f, capture) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseLine(line)
		// A mutated line may read as another line form: form 0 accepts any.
		checkRecord(t, line, r, err, 0)
	})
}

func FuzzParseKmsg(f *testing.F) {
	fuzzLine(f, "kmsg.txt", func(b string) string { return "5,401,8100000,-;audit: type=1423 " + b })
}

func FuzzParseDmesg(f *testing.F) {
	fuzzLine(f, "dmesg.txt", func(b string) string { return "[    1.381916] audit: type=1423 " + b })
}

func FuzzParseAuditd(f *testing.F) {
	fuzzLine(f, "auditd.log", func(b string) string {
		return "node=guest type=LANDLOCK_ACCESS msg=" + b
	})
}
