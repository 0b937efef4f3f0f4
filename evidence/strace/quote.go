package strace

import (
	"errors"
	"fmt"
	"strings"
)

// Unquote decodes one strace string literal: a double-quoted string with C
// escapes (\n \t \r \v \f \a \b \" \\ \' , octal \NNN of up to three digits,
// hexadecimal \xHH as `-x` prints them), optionally followed by "..." when
// strace cut the string at its -s limit (truncated is then true). The result
// holds raw bytes and need not be UTF-8.
func Unquote(s string) (text string, truncated bool, err error) {
	if strings.HasSuffix(s, `"...`) && len(s) >= 5 {
		s = s[:len(s)-3]
		truncated = true
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false, fmt.Errorf("string literal %.40q: want one enclosed in double quotes", s)
	}
	body, err := unescape(s[1:len(s)-1], '"')
	if err != nil {
		return "", false, err
	}
	return body, truncated, nil
}

// unescape decodes C escapes in s. An unescaped stop byte is an error (it
// would have ended the literal).
func unescape(s string, stop byte) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		if stop != 0 && strings.IndexByte(s, stop) >= 0 {
			return "", fmt.Errorf("unescaped %q inside %.40q", stop, s)
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == stop && stop != 0 {
			return "", fmt.Errorf("unescaped %q inside %.40q", stop, s)
		}
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		if i == len(s) {
			return "", errors.New("string ends inside an escape")
		}
		if e := simpleEscape[s[i]]; e != 0 {
			b = append(b, e)
			continue
		}
		v, last, err := numericEscape(s, i)
		if err != nil {
			return "", err
		}
		b = append(b, v)
		i = last
	}
	return string(b), nil
}

// simpleEscape is the byte each one-letter escape stands for, 0 for none.
var simpleEscape = [256]byte{
	'n': '\n', 't': '\t', 'r': '\r', 'v': '\v', 'f': '\f', 'a': '\a', 'b': '\b',
	'"': '"', '\\': '\\', '\'': '\'', '?': '?',
}

// numericEscape decodes the hexadecimal (\xHH) or octal (\OOO) escape
// whose first byte after the backslash is s[i]; it returns the byte and
// the index of the escape's last byte.
func numericEscape(s string, i int) (byte, int, error) {
	if c := s[i]; c == 'x' {
		v, n := 0, 0
		for n < 2 && i+1 < len(s) && isHex(s[i+1]) {
			i++
			v = v<<4 | hexVal(s[i])
			n++
		}
		if n == 0 {
			return 0, 0, fmt.Errorf(`\x without hexadecimal digits in %.40q`, s)
		}
		return byte(v), i, nil
	}
	c := s[i]
	if c < '0' || c > '7' {
		return 0, 0, fmt.Errorf(`unknown escape \%c in %.40q`, c, s)
	}
	v := int(c - '0')
	for n := 1; n < 3 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7'; n++ {
		i++
		v = v<<3 | int(s[i]-'0')
	}
	if v > 0xff {
		return 0, 0, fmt.Errorf(`octal escape above \377 in %.40q`, s)
	}
	return byte(v), i, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}

// Quote renders s as strace 6.1 prints a string argument without -x:
// printable ASCII as is, \t \n \v \f \r by name, `"` and `\` escaped, every
// other byte in octal (three digits when an octal digit follows, so the
// escape cannot swallow it). Unquote(Quote(s)) returns s.
func Quote(s string) string {
	return `"` + escape(s, "") + `"`
}

// escape is Quote's body; extra lists further bytes that must be escaped in
// octal (strace escapes < and > inside -y annotations).
func escape(s, extra string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
			continue
		case '\\':
			b.WriteString(`\\`)
			continue
		case '\t':
			b.WriteString(`\t`)
			continue
		case '\n':
			b.WriteString(`\n`)
			continue
		case '\v':
			b.WriteString(`\v`)
			continue
		case '\f':
			b.WriteString(`\f`)
			continue
		case '\r':
			b.WriteString(`\r`)
			continue
		}
		if c >= 0x20 && c < 0x7f && strings.IndexByte(extra, c) < 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('\\')
		next := i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7'
		switch {
		case next || c >= 0100:
			b.WriteByte('0' + c>>6)
			b.WriteByte('0' + c>>3&7)
		case c >= 010:
			b.WriteByte('0' + c>>3&7)
		}
		b.WriteByte('0' + c&7)
	}
	return b.String()
}

// QuotePath renders a path as strace's -y annotation does: like Quote's
// body, without the quotes, with < and > escaped in octal too.
func QuotePath(p string) string { return escape(p, "<>") }

// UnquotePath decodes a path from a -y annotation (see QuotePath).
func UnquotePath(s string) (string, error) { return unescape(s, 0) }
