package strace

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzParse feeds arbitrary text to the parser. Invariants: no panic; every
// Next returns exactly one of a call and an error; every string argument
// that decodes re-encodes to itself after Quote; and Unquote(Quote(input))
// is the input.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"basic.strace", "basic-superseded.strace"} {
		data := readCapture(f, name)
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var chunk []byte
		n := 0
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) > 600 {
				continue
			}
			chunk = append(append(chunk, line...), '\n')
			if n++; n%40 == 0 {
				f.Add(chunk)
				chunk = nil
			}
			if n > 1200 {
				break
			}
		}
	}
	f.Add([]byte("1 clone(flags=CLONE_THREAD <unfinished ...>\n2 openat(AT_FDCWD</>, \"x\", O_RDONLY) = -1 EACCES (Permission denied)\n1 <... clone resumed>) = 2\n"))
	f.Add([]byte("3 execve(\"/bin/sh\", [\"sh\"], 0x1 /* 2 vars */ <pid changed to 1 ...>\n1 +++ superseded by execve in pid 3 +++\n1 <... execve resumed>) = 0\n"))
	f.Add([]byte("4690  execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 var */ <pid changed to 4686 ...>\n4686  ???(4686  +++ superseded by execve in pid 4690 +++\n4686  <... execve resumed>) = 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := NewParser(bytes.NewReader(data))
		for i := 0; ; i++ {
			c, err := p.Next()
			if err == io.EOF {
				if c != nil {
					t.Fatal("io.EOF with a call")
				}
				break
			}
			if (c == nil) == (err == nil) {
				t.Fatalf("Next() = %v, %v: want exactly one of a call and an error", c, err)
			}
			if i > len(data)+10 {
				t.Fatal("more events than bytes")
			}
			if c == nil {
				continue
			}
			for _, a := range c.Args {
				s, ok := a.Str()
				if !ok {
					continue
				}
				back, _, err := Unquote(Quote(s))
				if err != nil || back != s {
					t.Fatalf("Unquote(Quote(%q)) = %q, %v", s, back, err)
				}
			}
			_, _ = c.Result()
			_ = c.String()
			for _, a := range c.Args {
				_, _ = a.FD()
				_, _ = a.SockAddr()
				_ = a.Flags()
			}
		}
		s := string(data)
		back, trunc, err := Unquote(Quote(s))
		if err != nil || trunc || back != s {
			t.Fatalf("Unquote(Quote(%q)) = %q, %v, %v", s, back, trunc, err)
		}
		if pb, err := UnquotePath(QuotePath(s)); err != nil || pb != s {
			t.Fatalf("UnquotePath(QuotePath(%q)) = %q, %v", s, pb, err)
		}
	})
}
