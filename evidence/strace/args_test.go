package strace

import (
	"strings"
	"testing"
)

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

// TestCommands: the pruner's and the observer's strace command lines, word
// for word; they differ only in --seccomp-bpf and the trace set.
func TestCommands(t *testing.T) {
	got := strings.Join(Command("t", "sh", "-c", "x"), " ")
	if want := "strace -f -qq -y -s 4096 -e trace=" + TraceSet + " -o t sh -c x"; got != want {
		t.Errorf("Command = %q, want %q", got, want)
	}
	got = strings.Join(SeccompCommand("t", []string{"openat", "ioctl"}, "sh"), " ")
	if want := "strace -f -qq -y -s 4096 --seccomp-bpf -e trace=openat,ioctl -o t sh"; got != want {
		t.Errorf("SeccompCommand = %q, want %q", got, want)
	}
}
