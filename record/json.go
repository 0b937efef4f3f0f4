package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SHA256Hex is the lower-case hex SHA-256 of data, the form every *_sha256
// field of a record holds.
func SHA256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Marshal encodes v as Python's json.dumps(v, indent=2, sort_keys=True)
// does, plus a final newline: v is first encoded with encoding/json (so
// struct tags and MarshalJSON methods apply), then rewritten.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var tree any
	if err := d.Decode(&tree); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var b bytes.Buffer
	writePy(&b, tree, 0)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func writePy(b *bytes.Buffer, v any, depth int) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(t.String())
	case string:
		writePyString(b, t)
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[")
		for i, e := range t {
			if i > 0 {
				b.WriteString(",")
			}
			newline(b, depth+1)
			writePy(b, e, depth+1)
		}
		newline(b, depth)
		b.WriteString("]")
	case map[string]any:
		if len(t) == 0 {
			b.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		// Python sorts str keys by code point; Go compares UTF-8 bytes,
		// which orders code points the same way.
		sort.Strings(keys)
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			newline(b, depth+1)
			writePyString(b, k)
			b.WriteString(": ")
			writePy(b, t[k], depth+1)
		}
		newline(b, depth)
		b.WriteString("}")
	default:
		panic(fmt.Sprintf("record: bug: %T in a decoded JSON tree", v))
	}
}

func newline(b *bytes.Buffer, depth int) {
	b.WriteByte('\n')
	for range depth {
		b.WriteString("  ")
	}
}

const hexDigits = "0123456789abcdef"

// writePyString writes s as Python's json with ensure_ascii=True does.
func writePyString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r < 0x10000:
			writeU(b, r)
		default:
			r -= 0x10000
			writeU(b, 0xd800+(r>>10)&0x3ff)
			writeU(b, 0xdc00+r&0x3ff)
		}
	}
	b.WriteByte('"')
}

func writeU(b *bytes.Buffer, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[r>>12&0xf])
	b.WriteByte(hexDigits[r>>8&0xf])
	b.WriteByte(hexDigits[r>>4&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

// Seconds is a duration in seconds that encodes as Python's repr of a float
// does (3.0, 0.25, 1e-05), as Phobos's records hold them.
type Seconds float64

// MarshalJSON writes s in Python's float repr; NaN and infinities are
// refused, as JSON has no spelling for them.
func (s Seconds) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("record: seconds %v is not a finite number", f)
	}
	return []byte(pyFloat(f)), nil
}

// pyFloat is Python's repr(float): the shortest round-tripping digits,
// positional for exponents -4 ≤ e < 16 (with ".0" when integral),
// scientific otherwise with a sign and at least two exponent digits.
func pyFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, exp)
}

// DecodeStrict decodes one JSON value of data into v, refusing unknown
// fields of v's structs (not of free-form maps) and trailing data.
func DecodeStrict(data []byte, v any) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("not UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}
