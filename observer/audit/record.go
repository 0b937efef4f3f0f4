package audit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Type is an audit record type, as in include/uapi/linux/audit.h.
type Type uint16

// Record types this package names. Others parse too and print as UNKNOWN[n].
const (
	TypeSyscall        Type = 1300 // AUDIT_SYSCALL
	TypePath           Type = 1302 // AUDIT_PATH
	TypeConfigChange   Type = 1305 // AUDIT_CONFIG_CHANGE
	TypeCWD            Type = 1307 // AUDIT_CWD
	TypeEOE            Type = 1320 // AUDIT_EOE: end of a multi-record event
	TypeProctitle      Type = 1327 // AUDIT_PROCTITLE
	TypeLandlockAccess Type = 1423 // AUDIT_LANDLOCK_ACCESS: a denial
	TypeLandlockDomain Type = 1424 // AUDIT_LANDLOCK_DOMAIN: a domain's allocation or deallocation
)

// typeNames are auditd's names (include/uapi/linux/audit.h, lib/msg_typetab.h
// of audit-userspace) for the types a Landlock observer meets; others print
// as UNKNOWN[n] and parse from that spelling or a number.
var typeNames = map[Type]string{
	1005: "USER", 1006: "LOGIN",
	1100: "USER_AUTH", 1101: "USER_ACCT", 1102: "USER_MGMT", 1103: "CRED_ACQ", 1104: "CRED_DISP",
	1105: "USER_START", 1106: "USER_END", 1107: "USER_AVC", 1108: "USER_CHAUTHTOK", 1109: "USER_ERR",
	1110: "CRED_REFR", 1111: "USYS_CONFIG", 1112: "USER_LOGIN", 1113: "USER_LOGOUT", 1123: "USER_CMD",
	1130: "SERVICE_START", 1131: "SERVICE_STOP",
	1200: "DAEMON_START", 1201: "DAEMON_END", 1202: "DAEMON_ABORT", 1203: "DAEMON_CONFIG",
	1204: "DAEMON_RECONFIG", 1205: "DAEMON_ROTATE", 1206: "DAEMON_RESUME", 1207: "DAEMON_ACCEPT",
	1208: "DAEMON_CLOSE", 1209: "DAEMON_ERR",
	TypeSyscall: "SYSCALL", TypePath: "PATH", 1303: "IPC", 1304: "SOCKETCALL", TypeConfigChange: "CONFIG_CHANGE",
	1306: "SOCKADDR", TypeCWD: "CWD", 1309: "EXECVE", TypeEOE: "EOE", 1321: "BPRM_FCAPS", 1322: "CAPSET",
	1323: "MMAP", 1326: "SECCOMP", TypeProctitle: "PROCTITLE", 1328: "FEATURE_CHANGE", 1329: "REPLACE",
	1330: "KERN_MODULE", 1334: "BPF", 1335: "EVENT_LISTENER", 1336: "URINGOP", 1337: "OPENAT2",
	1400: "AVC", 1401: "SELINUX_ERR",
	TypeLandlockAccess: "LANDLOCK_ACCESS", TypeLandlockDomain: "LANDLOCK_DOMAIN",
	1700: "ANOM_PROMISCUOUS", 1701: "ANOM_ABEND", 1702: "ANOM_LINK", 1703: "ANOM_CREAT",
	2000: "KERNEL",
}

var typeByName = func() map[string]Type {
	m := make(map[string]Type, len(typeNames))
	for t, n := range typeNames {
		m[n] = t
	}
	return m
}()

// String returns auditd's name for t, or UNKNOWN[n] as auditd writes a type
// it has no name for.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "UNKNOWN[" + strconv.Itoa(int(t)) + "]"
}

// Form is the way a record reached user space.
type Form uint8

// The forms a record arrives in.
const (
	FormNetlink Form = iota + 1 // the body of a NETLINK_AUDIT message; type from the header
	FormKmsg                    // a /dev/kmsg record: "prio,seq,usec,flags;audit: type=N audit(…): …"
	FormDmesg                   // a dmesg line: "[    1.381916] audit: type=N audit(…): …"
	FormAuditd                  // auditd's log: "type=NAME msg=audit(…): …"
)

func (f Form) String() string {
	switch f {
	case FormNetlink:
		return "netlink"
	case FormKmsg:
		return "kmsg"
	case FormDmesg:
		return "dmesg"
	case FormAuditd:
		return "auditd"
	}
	return "form(" + strconv.Itoa(int(f)) + ")"
}

// Field is one key=value pair of a record, as the kernel wrote it.
type Field struct {
	Key string
	// Value is the text without surrounding quotes, not hex-decoded.
	Value string
	// Quoted is true when the kernel wrote the value in double quotes (an
	// untrusted string that needed no hex encoding), '' for single quotes.
	Quoted byte
}

// Record is one audit record. Strings alias the parsed input.
type Record struct {
	Type Type
	Form Form
	// Sec and Milli are the event's timestamp (seconds since the epoch and
	// milliseconds), Serial its serial number: records of one event share all
	// three.
	Sec    int64
	Milli  uint16
	Serial uint64
	// KmsgSeq is the /dev/kmsg sequence number (FormKmsg only); Monotonic is
	// the time since boot that kmsg or dmesg stamped on the line (zero when
	// the line carried none).
	KmsgSeq   uint64
	Monotonic time.Duration

	// The fields, in the order written (a key may repeat; Get returns the
	// last), as offsets into text: no pointers, so parsing costs the
	// garbage collector nothing beyond text itself.
	text   string
	n      int
	inline [inlineFields]span
	more   []span
}

// inlineFields covers every Landlock record; SYSCALL records spill over.
const inlineFields = 12

// span locates one field in Record.text.
type span struct {
	k0, k1, v0, v1 uint32
	q              byte
}

// NumFields returns the number of fields.
func (r *Record) NumFields() int { return r.n }

// Field returns field i (0 <= i < NumFields()); its strings alias the input.
func (r *Record) Field(i int) Field {
	var sp *span
	if i < inlineFields {
		sp = &r.inline[i]
	} else {
		sp = &r.more[i-inlineFields]
	}
	return Field{Key: r.text[sp.k0:sp.k1], Value: r.text[sp.v0:sp.v1], Quoted: sp.q}
}

// Fields returns every field in order, in a new slice.
func (r *Record) Fields() []Field {
	fs := make([]Field, r.n)
	for i := range fs {
		fs[i] = r.Field(i)
	}
	return fs
}

// Time returns the record's timestamp.
func (r *Record) Time() time.Time {
	return time.Unix(r.Sec, int64(r.Milli)*int64(time.Millisecond)).UTC()
}

// Raw returns the value of the last field named key as written (quotes
// removed, not decoded).
func (r *Record) Raw(key string) (string, bool) {
	for i := r.n - 1; i >= 0; i-- {
		if f := r.Field(i); f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Get returns the value of the last field named key, hex-decoded when key is
// one of the kernel's untrusted strings and the kernel wrote it unquoted.
func (r *Record) Get(key string) (string, bool, error) {
	for i := r.n - 1; i >= 0; i-- {
		f := r.Field(i)
		if f.Key != key {
			continue
		}
		v, err := f.Decoded()
		return v, true, err
	}
	return "", false, nil
}

// untrusted lists the keys the kernel writes with audit_log_untrustedstring
// (or audit_log_n_hex, for proctitle): quoted when clean, hex otherwise.
var untrusted = map[string]bool{
	"path": true, "dev": true, "name": true, "exe": true, "comm": true,
	"ocomm": true, "proctitle": true, "cwd": true,
}

// Decoded returns the field's value with the kernel's hex encoding of
// untrusted strings undone. "(null)" and "?" stand for no value and decode to
// the empty string.
func (f *Field) Decoded() (string, error) {
	if f.Quoted != 0 || !untrusted[f.Key] {
		return f.Value, nil
	}
	switch f.Value {
	case "(null)", "?":
		return "", nil
	}
	s, err := decodeHex(f.Value)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", f.Key, clip(f.Value), err)
	}
	return s, nil
}

var errOddHex = errors.New("unquoted value is not upper-case hex of whole bytes")

func decodeHex(s string) (string, error) {
	if len(s)%2 != 0 {
		return "", errOddHex
	}
	b := make([]byte, len(s)/2)
	for i := 0; i < len(s); i += 2 {
		hi, lo := unhex(s[i]), unhex(s[i+1])
		if hi < 0 || lo < 0 {
			return "", errOddHex
		}
		b[i/2] = byte(hi<<4 | lo)
	}
	return string(b), nil
}

// unhex accepts upper-case digits as the kernel writes them, and lower case
// for hand-written input.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// Body renders the record as the kernel's netlink body,
// "audit(<sec>.<ms>:<serial>): key=value …"; ParseNetlink(r.Type, r.Body())
// gives r back (but for Form and the kmsg/dmesg stamps).
func (r *Record) Body() string {
	var b strings.Builder
	b.Grow(32 + len(r.text))
	b.WriteString("audit(")
	b.WriteString(strconv.FormatInt(r.Sec, 10))
	b.WriteByte('.')
	ms := strconv.Itoa(int(r.Milli))
	b.WriteString("000"[len(ms):])
	b.WriteString(ms)
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(r.Serial, 10))
	b.WriteString("):")
	for i := 0; i < r.n; i++ {
		f := r.Field(i)
		b.WriteByte(' ')
		b.WriteString(f.Key)
		b.WriteByte('=')
		if f.Quoted != 0 {
			b.WriteByte(f.Quoted)
		}
		b.WriteString(f.Value)
		if f.Quoted != 0 {
			b.WriteByte(f.Quoted)
		}
	}
	return b.String()
}

// String renders the record in the printk form the kernel uses when no
// daemon listens: "audit: type=N audit(…): …".
func (r *Record) String() string {
	return "audit: type=" + strconv.Itoa(int(r.Type)) + " " + r.Body()
}
