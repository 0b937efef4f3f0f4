package shellquote

import "strings"

// quote returns s as one shell word: s itself when every byte is safe
// unquoted, else s in single quotes, where each single quote of s ends the
// quoting, is escaped with a backslash and the quoting resumes. Single
// quotes keep every other byte, newlines and bytes that are not UTF-8 too.
// s must not hold NUL, which no shell word can carry.
func quote(s string) string {
	if s != "" && plain(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each argument and joins them with spaces: one pasteable line
// (a single word is Join of one).
func Join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

// plain reports whether s needs no quotes: letters, digits and -_./:,+@%
// anywhere, and = after the first byte, so an environment assignment
// (CC=gcc) stays one a shell runs as such, while a word starting with =
// (zsh's =cmd expansion) is quoted. Everything else is quoted: blanks,
// quotes, $ ` \ ; & | < > ( ) { } [ ] * ? ~ # ! ^ and every byte >= 0x80.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-_./:,+@%", c) >= 0:
		case c == '=' && i > 0:
		default:
			return false
		}
	}
	return true
}
