package observer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

// denialsOf parses netlink-form LANDLOCK_ACCESS bodies into denials.
func denialsOf(t *testing.T, bodies ...string) []audit.Denial {
	t.Helper()
	var ds []audit.Denial
	for _, b := range bodies {
		r, err := audit.ParseNetlink(1423, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Access()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, audit.Denial{Access: a, Record: r})
	}
	return ds
}

func TestRows(t *testing.T) {
	// The bind_udp body is the one the 7.2 kernel writes (captured on 7.2.9 by Phobos:
	// testdata/audit/phobos-linux-7.2.9.dmesg), in the netlink form.
	udp5000 := "audit(1791375760.016:59): domain=119fe767d blockers=net.bind_udp saddr=127.0.0.1 src=5000"
	autobind := "audit(1791375760.017:60): domain=119fe767d blockers=net.bind_udp"
	read := `audit(1791375760.018:61): domain=119fe767d blockers=fs.read_file path="/etc/hostname" dev="vda" ino=177`
	for _, tc := range []struct {
		name   string
		bind   []string
		bodies []string
		held   []policy.BindRule
		rows   []string
		other  []string
	}{
		{"udp bind named by both", []string{"allow 5000 udp"}, []string{udp5000, read}, nil, []string{"allow 5000 udp"}, nil},
		{"no record for the port", []string{"allow 5001 udp"}, []string{udp5000}, nil, nil, []string{"allow 5001 udp"}},
		{"tcp is never a row", []string{"allow 5000 tcp"}, []string{udp5000}, nil, nil, []string{"allow 5000 tcp"}},
		{"autobind is port 0", []string{"allow 0 udp"}, []string{autobind}, nil, []string{"allow 0 udp"}, nil},
		{"already held", []string{"allow 5000 udp"}, []string{udp5000}, []policy.BindRule{{Port: 5000, Transport: policy.UDP}}, nil, nil},
		{"port out of range", []string{"allow 70000 udp"}, []string{udp5000}, nil, nil, []string{"allow 70000 udp"}},
		{"no record at all", []string{"allow 5000 udp"}, nil, nil, nil, []string{"allow 5000 udp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, ports, other := Rows(tc.bind, denialsOf(t, tc.bodies...), tc.held)
			if got := rowRules(rows); !slices.Equal(got, nonNil(tc.rows)) {
				t.Errorf("rows = %q, want %q", got, tc.rows)
			}
			if !slices.Equal(other, tc.other) {
				t.Errorf("other = %q, want %q", other, tc.other)
			}
			if len(ports) != len(rows) {
				t.Errorf("ports %v for rows %v", ports, rows)
			}
			for _, r := range rows {
				if len(r.Audit) == 0 || !strings.Contains(r.Audit[0], "net.bind_udp") {
					t.Errorf("row %s has audit %q, want the net.bind_udp records", r.Rule, r.Audit)
				}
			}
		})
	}
}

// TestNarrowedSparesWhatStartsTheInterpreter is the generic exercise's
// policy: every second grant removed would take the library directory bash
// loads libc from, and the run would stop before the command started
// (status 126).
func TestNarrowedSparesWhatStartsTheInterpreter(t *testing.T) {
	p, err := policy.Parse("generic.cfg", []byte("[read]\n/usr/bin\n/usr/lib/x86_64-linux-gnu\n/var/tmp/testing-dir\n[execute]\n/usr/bin\n/usr/lib/x86_64-linux-gnu\n[write]\n/var/tmp/testing-dir\n"))
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"/usr/bin/bash", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6"}
	n, removed := policy.Narrowed(p, needed...)
	if removed != 1 || n.FS["/usr/lib/x86_64-linux-gnu"] == nil || n.FS["/usr/bin"] == nil || n.FS["/var/tmp/testing-dir"] != nil {
		t.Errorf("policy.Narrowed(generic) kept %v (removed %d); want the interpreter's directories kept and the working directory removed", n.FS, removed)
	}
	// Without what is needed, every second grant goes, whatever it holds.
	if n, removed := policy.Narrowed(p); removed != 1 || n.FS["/usr/lib/x86_64-linux-gnu"] != nil {
		t.Errorf("policy.Narrowed(generic) without needs kept %v (removed %d); want index 1 removed", n.FS, removed)
	}
}

func TestStartNeedsBash(t *testing.T) {
	needs, err := StartNeeds("/bin/bash")
	if err != nil {
		t.Fatal(err)
	}
	var libc, loader bool
	for _, f := range needs {
		libc = libc || strings.HasPrefix(filepath.Base(f), "libc.so")
		loader = loader || strings.HasPrefix(filepath.Base(f), "ld-linux")
		if l, _ := os.Lstat(f); l == nil || l.Mode()&os.ModeSymlink != 0 {
			t.Errorf("%s: want an existing file with symlinks resolved", f)
		}
	}
	if !libc || !loader || len(needs) < 3 {
		t.Errorf("StartNeeds(/bin/bash) = %v; want bash, its loader and libc", needs)
	}
}
