package policy

import (
	"regexp"
	"testing"
)

// phobosUDPBindRow is Phobos's UDP_BIND_ROW, the reference UDPBindRow must
// agree with.
var phobosUDPBindRow = regexp.MustCompile(`^allow (0|[1-9][0-9]{0,4}) udp$`)

func TestUDPBindRow(t *testing.T) {
	for _, tc := range []struct {
		rule string
		port int
		ok   bool
	}{
		{"allow 5000 udp", 5000, true},
		{"allow 0 udp", 0, true},
		{"allow 99999 udp", 99999, true},
		{"allow 65536 udp", 65536, true},
		{"allow 00 udp", 0, false},
		{"allow 007 udp", 0, false},
		{"allow 100000 udp", 0, false},
		{"allow  5000 udp", 0, false},
		{"allow 5000 tcp", 0, false},
		{"allow 5000", 0, false},
		{"allow  udp", 0, false},
		{"allow udp", 0, false},
		{"allow +5 udp", 0, false},
		{"allow ٥ udp", 0, false},
		{" allow 5 udp", 0, false},
	} {
		port, ok := UDPBindRow(tc.rule)
		if port != tc.port || ok != tc.ok {
			t.Errorf("UDPBindRow(%q) = %d, %v; want %d, %v", tc.rule, port, ok, tc.port, tc.ok)
		}
	}
}

// FuzzUDPBindRow holds UDPBindRow to Phobos's regular expression.
func FuzzUDPBindRow(f *testing.F) {
	for _, s := range []string{"allow 5000 udp", "allow 0 udp", "allow 00 udp", "allow 5000 tcp", "allow  udp", "allow 123456 udp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rule string) {
		_, ok := UDPBindRow(rule)
		if want := phobosUDPBindRow.MatchString(rule); ok != want {
			t.Errorf("UDPBindRow(%q) ok = %v, Phobos's expression says %v", rule, ok, want)
		}
	})
}
