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

// ParseError reports input that is not a well-formed audit record.
type ParseError struct {
	Form  Form
	Input string // clipped to 96 bytes
	Msg   string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("parse %s audit record %q: %s", e.Form, e.Input, e.Msg)
}

// ErrNotAudit is returned (wrapped in a *ParseError) for a kmsg or dmesg line
// that is not an audit record at all, so that readers can skip the rest of the
// kernel log without mistaking a damaged record for it.
var ErrNotAudit = errors.New("not an audit record")

// Is makes a ParseError for a non-audit line match ErrNotAudit.
func (e *ParseError) Is(target error) bool {
	return target == ErrNotAudit && e.Msg == ErrNotAudit.Error()
}

func clip(s string) string {
	if len(s) > 96 {
		return s[:93] + "..."
	}
	return s
}

func perr(form Form, in, format string, a ...any) error {
	return &ParseError{Form: form, Input: clip(in), Msg: fmt.Sprintf(format, a...)}
}

// ParseNetlink parses the body of a NETLINK_AUDIT message of type typ. A
// trailing NUL or newline is ignored. The returned record aliases a string
// copy of data.
func ParseNetlink(typ uint16, data []byte) (Record, error) {
	for len(data) > 0 && (data[len(data)-1] == 0 || data[len(data)-1] == '\n') {
		data = data[:len(data)-1]
	}
	s := string(data)
	var r Record
	if err := parseBody(&r, FormNetlink, s, s); err != nil {
		return Record{}, err
	}
	r.Type = Type(typ)
	r.Form = FormNetlink
	return r, nil
}

// ParseLine parses one line in the kmsg, dmesg or auditd form (detected from
// its start); a trailing newline or NUL is ignored. Lines of the kernel log that are not audit records give an error
// matching ErrNotAudit.
func ParseLine(line string) (Record, error) {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r' || line[len(line)-1] == 0) {
		line = line[:len(line)-1]
	}
	var r Record
	var err error
	switch {
	case strings.HasPrefix(line, "type="), strings.HasPrefix(line, "node="):
		err = parseAuditd(&r, line)
	case line != "" && line[0] >= '0' && line[0] <= '9':
		err = parseKmsg(&r, line)
	default:
		err = parseDmesg(&r, line)
	}
	if err != nil {
		return Record{}, err
	}
	return r, nil
}

// parseKmsg parses "<prio>,<seq>,<usec>,<flags>[,…];<message>".
func parseKmsg(r *Record, line string) error {
	semi := strings.IndexByte(line, ';')
	if semi < 0 {
		return perr(FormKmsg, line, "no ';' after the kmsg header")
	}
	hdr, msg := line[:semi], line[semi+1:]
	var parts [3]string
	for i := range parts {
		c := strings.IndexByte(hdr, ',')
		if c < 0 {
			return perr(FormKmsg, line, "kmsg header %q has fewer than 4 fields", line[:semi])
		}
		parts[i], hdr = hdr[:c], hdr[c+1:]
	}
	if _, err := strconv.ParseUint(parts[0], 10, 32); err != nil {
		return perr(FormKmsg, line, "kmsg priority %q is not a number", parts[0])
	}
	seq, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return perr(FormKmsg, line, "kmsg sequence %q is not a number", parts[1])
	}
	usec, err := strconv.ParseUint(parts[2], 10, 63)
	if err != nil || usec > uint64(1<<63-1)/uint64(time.Microsecond) {
		return perr(FormKmsg, line, "kmsg timestamp %q is not a number of microseconds", parts[2])
	}
	if err := parsePrintk(r, FormKmsg, line, msg); err != nil {
		return err
	}
	r.KmsgSeq = seq
	r.Monotonic = time.Duration(usec) * time.Microsecond
	return nil
}

// parseDmesg parses "[<sec>.<usec>] audit: …", also without the stamp (dmesg
// -t) and with a leading "<prio>" (dmesg -r).
func parseDmesg(r *Record, line string) error {
	msg := line
	if strings.HasPrefix(msg, "<") {
		end := strings.IndexByte(msg, '>')
		if end < 0 {
			return perr(FormDmesg, line, "%v", ErrNotAudit)
		}
		msg = msg[end+1:]
	}
	var mono time.Duration
	if strings.HasPrefix(msg, "[") {
		end := strings.IndexByte(msg, ']')
		if end < 0 {
			return perr(FormDmesg, line, "%v", ErrNotAudit)
		}
		d, err := parseUptime(strings.TrimSpace(msg[1:end]))
		if err != nil {
			return perr(FormDmesg, line, "dmesg stamp %q: %v", msg[1:end], err)
		}
		mono = d
		msg = strings.TrimPrefix(msg[end+1:], " ")
	}
	if err := parsePrintk(r, FormDmesg, line, msg); err != nil {
		return err
	}
	r.Monotonic = mono
	return nil
}

func parseUptime(s string) (time.Duration, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseUint(sec, 10, 32)
	if err != nil {
		return 0, errors.New("seconds are not a number")
	}
	d := time.Duration(n) * time.Second
	if frac != "" {
		if len(frac) > 9 {
			return 0, errors.New("more than 9 fraction digits")
		}
		f, err := strconv.ParseUint(frac, 10, 32)
		if err != nil {
			return 0, errors.New("fraction is not a number")
		}
		for i := len(frac); i < 9; i++ {
			f *= 10
		}
		d += time.Duration(f)
	}
	return d, nil
}

// parsePrintk parses the kernel's printk fallback "audit: type=N audit(…): …".
func parsePrintk(r *Record, form Form, line, msg string) error {
	rest, ok := strings.CutPrefix(msg, "audit: type=")
	if !ok {
		return perr(form, line, "%v", ErrNotAudit)
	}
	sp := strings.IndexByte(rest, ' ')
	if sp < 0 {
		return perr(form, line, "nothing after the record type")
	}
	t, err := strconv.ParseUint(rest[:sp], 10, 16)
	if err != nil {
		return perr(form, line, "record type %q is not a number", rest[:sp])
	}
	if err := parseBody(r, form, line, rest[sp+1:]); err != nil {
		return err
	}
	r.Type = Type(t)
	r.Form = form
	return nil
}

// parseAuditd parses "[node=N ]type=NAME msg=audit(…): …"; auditd's enriched
// format appends interpreted fields after a 0x1d byte, which are dropped.
func parseAuditd(r *Record, line string) error {
	msg := line
	if i := strings.IndexByte(msg, 0x1d); i >= 0 {
		msg = msg[:i]
	}
	if strings.HasPrefix(msg, "node=") {
		sp := strings.IndexByte(msg, ' ')
		if sp < 0 {
			return perr(FormAuditd, line, "nothing after node=")
		}
		msg = msg[sp+1:]
	}
	rest, ok := strings.CutPrefix(msg, "type=")
	if !ok {
		return perr(FormAuditd, line, "no type= after node=")
	}
	sp := strings.IndexByte(rest, ' ')
	if sp < 0 {
		return perr(FormAuditd, line, "nothing after the record type")
	}
	t, err := parseTypeName(rest[:sp])
	if err != nil {
		return perr(FormAuditd, line, "%v", err)
	}
	body, ok := strings.CutPrefix(rest[sp+1:], "msg=")
	if !ok {
		return perr(FormAuditd, line, "no msg= after type=%s", rest[:sp])
	}
	if err := parseBody(r, FormAuditd, line, body); err != nil {
		return err
	}
	r.Type = t
	r.Form = FormAuditd
	return nil
}

func parseTypeName(s string) (Type, error) {
	if t, ok := typeByName[s]; ok {
		return t, nil
	}
	if n, ok := strings.CutPrefix(s, "UNKNOWN["); ok && strings.HasSuffix(n, "]") {
		if v, err := strconv.ParseUint(n[:len(n)-1], 10, 16); err == nil {
			return Type(v), nil
		}
	}
	if v, err := strconv.ParseUint(s, 10, 16); err == nil {
		return Type(v), nil
	}
	return 0, fmt.Errorf("unknown record type %q (want a name such as LANDLOCK_ACCESS, UNKNOWN[n] or a number)", s)
}

// parseBody parses "audit(<sec>.<ms>:<serial>): key=value …" into r.
func parseBody(r *Record, form Form, line, body string) error {
	rest, ok := strings.CutPrefix(body, "audit(")
	if !ok {
		return perr(form, line, "no audit(<time>:<serial>) stamp")
	}
	end := strings.IndexByte(rest, ')')
	if end < 0 {
		return perr(form, line, "audit( stamp is not closed")
	}
	stamp := rest[:end]
	rest = rest[end+1:]
	dot := strings.IndexByte(stamp, '.')
	colon := strings.IndexByte(stamp, ':')
	if dot < 0 || colon < dot {
		return perr(form, line, "stamp %q is not <sec>.<ms>:<serial>", stamp)
	}
	sec, ok := digits(stamp[:dot], 1<<62)
	if !ok {
		return perr(form, line, "stamp seconds %q are not a number", stamp[:dot])
	}
	ms, ok := digits(stamp[dot+1:colon], 999)
	if !ok || colon-dot-1 != 3 {
		return perr(form, line, "stamp milliseconds %q are not 3 digits", stamp[dot+1:colon])
	}
	serial, ok := digits(stamp[colon+1:], 1<<63)
	if !ok {
		return perr(form, line, "stamp serial %q is not a number", stamp[colon+1:])
	}
	rest, ok = strings.CutPrefix(rest, ":")
	if !ok {
		return perr(form, line, "no ':' after the stamp")
	}
	r.Sec, r.Milli, r.Serial = int64(sec), uint16(ms), serial
	if err := r.parseFields(rest); err != nil {
		*r = Record{}
		return perr(form, line, "%v", err)
	}
	return nil
}

// parseFields splits ` key=value key="value" …` into r. Keys are
// [a-z0-9_-]+ as the kernel writes them; values end at a space, or at the
// closing quote. The kernel never writes a control byte in a value (it
// hex-encodes such strings), so one is an error.
func (r *Record) parseFields(s string) error {
	if uint64(len(s)) >= 1<<32 {
		return errors.New("record longer than 4 GiB")
	}
	r.text = s
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			return nil
		}
		sp, next, err := scanField(s, i)
		if err != nil {
			return err
		}
		i = next
		if r.n < inlineFields {
			r.inline[r.n] = sp
		} else {
			r.more = append(r.more, sp)
		}
		r.n++
	}
}

// scanField scans the field that starts at s[i], returning its span and
// the index just after it.
func scanField(s string, i int) (span, int, error) {
	k := i
	for i < len(s) && isKeyByte(s[i]) {
		i++
	}
	if i == k || i == len(s) || s[i] != '=' {
		end := strings.IndexByte(s[k:], ' ')
		if end < 0 {
			end = len(s) - k
		}
		return span{}, 0, fmt.Errorf("%q is not key=value", clip(s[k:k+end]))
	}
	sp := span{k0: uint32(k), k1: uint32(i)}
	key := s[k:i]
	i++
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		return scanQuoted(s, i, key, sp)
	}
	v := i
	for i < len(s) && s[i] > ' ' {
		i++
	}
	sp.v0, sp.v1 = uint32(v), uint32(i)
	if i < len(s) && s[i] != ' ' {
		return span{}, 0, fmt.Errorf("%s: control byte %#x in a value", key, s[i])
	}
	return sp, i, nil
}

// scanQuoted scans key's quoted value, whose opening quote is s[i], into
// sp and returns the index just after the closing quote.
func scanQuoted(s string, i int, key string, sp span) (span, int, error) {
	q := s[i]
	end := strings.IndexByte(s[i+1:], q)
	if end < 0 {
		return span{}, 0, fmt.Errorf("%s: quote not closed", key)
	}
	sp.q, sp.v0, sp.v1 = q, uint32(i+1), uint32(i+1+end)
	for j := i + 1; j < i+1+end; j++ {
		if s[j] < 0x20 {
			return span{}, 0, fmt.Errorf("%s: control byte %#x in a quoted value", key, s[j])
		}
	}
	i += end + 2
	if i < len(s) && s[i] != ' ' {
		return span{}, 0, fmt.Errorf("%s: text after the closing quote", key)
	}
	return sp, i, nil
}

// digits parses a non-empty decimal number of at most max (< 1<<63 + 1), or
// reports false: the stamp's numbers, without strconv's generality.
func digits(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		v = v*10 + uint64(c)
	}
	return v, v <= max
}

func isKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
