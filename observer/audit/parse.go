package audit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

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
