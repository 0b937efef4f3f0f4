package contain

import (
	"strings"
	"testing"
)

// FuzzParseOutput: the probe's stdout comes from a process under test, so
// any bytes must parse; an errno is only ever taken from an OP line and never
// spans a line break.
func FuzzParseOutput(f *testing.F) {
	f.Add([]byte("START\nOP read ret=0 errno=EACCES\n"))
	f.Add([]byte("lockstep run: refused\n"))
	f.Add([]byte("START\nOP nofile ret=250 errno=EMFILE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o := ParseOutput(b)
		if strings.ContainsAny(o.Errno, "\n") || strings.ContainsAny(o.Line, "\n") {
			t.Errorf("ParseOutput(%q) = %+v: a field spans lines", b, o)
		}
		if o.Errno != "" && !strings.HasPrefix(o.Line, "OP ") {
			t.Errorf("ParseOutput(%q) = %+v: an errno without an OP line", b, o)
		}
	})
}
