package strace

import "testing"

// TestQuotedPrefix: escaped quotes stay inside the literal, an even run
// of backslashes does not, and strace's truncation mark belongs to it.
func TestQuotedPrefix(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`"a\"b", 3`, `"a\"b"`, true},
		{`"a\\", 3`, `"a\\"`, true},
		{`"\26\3\1"..., iov_len=517}`, `"\26\3\1"...`, true},
		{`"never ends`, "", false},
		{`NULL, 0`, "", false},
	}
	for _, tt := range tests {
		got, ok := QuotedPrefix(tt.in)
		if string(got) != tt.want || ok != tt.ok {
			t.Errorf("QuotedPrefix(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
