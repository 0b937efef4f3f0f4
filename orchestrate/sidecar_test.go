package orchestrate

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// phobosUDPBindRow is Phobos's UDP_BIND_ROW: the oracle accepted rows are held to.
var phobosUDPBindRow = regexp.MustCompile(`^allow (0|[1-9][0-9]{0,4}) udp$`)

func TestSidecarRows(t *testing.T) {
	for _, tc := range []struct {
		Name, Src string
		Rows      string // "" when refused
		Err       string
	}{
		{"phobos shape", "# ABI 10 rows for java/two, from the KVM run on kernel 7.2.13 on 2026-11-21.\n# Each row …\n[bind]\nallow 5000 udp\n", "allow 5000 udp", ""},
		{"port zero", "[bind]\nallow 0 udp\n", "allow 0 udp", ""},
		{"top port", "[bind]\nallow 65535 udp\nallow 1 udp\n", "allow 65535 udp,allow 1 udp", ""},
		{"trailing comment", "[bind]\nallow 5000 udp # seen twice\n", "allow 5000 udp", ""},
		{"tcp row", "[bind]\nallow 5000\n", "", `row "allow 5000" is not allow <port> udp`},
		{"tcp word", "[bind]\nallow 5000 tcp\n", "", "is not allow <port> udp"},
		{"two spaces", "[bind]\nallow  5000 udp\n", "", "is not allow <port> udp"},
		{"00", "[bind]\nallow 00 udp\n", "", "not a valid policy"},
		{"007", "[bind]\nallow 007 udp\n", "", "not a valid policy"},
		{"65536", "[bind]\nallow 65536 udp\n", "", "not a valid policy"},
		{"arabic indic", "[bind]\nallow \u0665000 udp\n", "", "not a valid policy"},
		{"fullwidth", "[bind]\nallow \uff15000 udp\n", "", "not a valid policy"},
		{"read", "[read]\n/usr\n", "", "[read] rows"},
		{"connect", "[connect]\nallow localhost udp\n", "", "[connect] rows"},
		{"limits", "[limits]\ntimeout=1\n", "", "[limits] rows"},
		{"empty other section", "[create]\n[bind]\nallow 1 udp\n", "", `row "[create]"`},
		{"no rows", "[bind]\n", "", "holds no row"},
		{"empty", "", "", "holds no row"},
		{"crlf", "[bind]\r\nallow 5000 udp\r\n", "", "not a valid policy"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			rows, err := SidecarRows([]byte(tc.Src))
			if tc.Err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.Err) {
					t.Fatalf("SidecarRows(%q) = %v, %v; want an error with %q", tc.Src, rows, err, tc.Err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SidecarRows(%q): %v", tc.Src, err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, r.String())
			}
			if strings.Join(got, ",") != tc.Rows {
				t.Fatalf("SidecarRows(%q) = %q, want %q", tc.Src, got, tc.Rows)
			}
		})
	}
}

// FuzzSidecarRows: no input panics; an accepted sidecar yields only UDP bind
// rows with ports 0-65535, every row line has the exact shape, and the rows
// rendered again are accepted as the same rows.
func FuzzSidecarRows(f *testing.F) {
	data, err := os.ReadFile(fixtureDir + "/java_two.abi10.cfg")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	for _, s := range []string{
		"[bind]\nallow 0 udp\n", "[bind]\nallow 00 udp\n", "[bind]\nallow 007 udp\n", "[bind]\nallow 65536 udp\n",
		"[bind]\nallow \u0665000 udp\n", "[read]\n/usr\n", "[bind]\nallow 5000\n", "#\n[bind]\nallow 1 udp # x\nallow 1 udp\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		rows, err := SidecarRows(src)
		if err != nil {
			if rows != nil {
				t.Fatalf("rows beside an error: %v", err)
			}
			return
		}
		if len(rows) == 0 {
			t.Fatal("accepted a sidecar without rows")
		}
		for _, r := range rows {
			if r.Transport != policy.UDP || r.Port < 0 || r.Port > 65535 {
				t.Fatalf("accepted row %+v", r)
			}
		}
		for _, line := range strings.Split(string(src), "\n") {
			c, _, _ := strings.Cut(line, "#")
			c = strings.TrimSpace(c)
			if c != "" && c != "[bind]" && !phobosUDPBindRow.MatchString(c) {
				t.Fatalf("accepted line %q", c)
			}
		}
		again := (&policy.Policy{Bind: rows}).Render()
		rows2, err := SidecarRows(again)
		if err != nil {
			t.Fatalf("re-rendered rows refused: %v\n%s", err, again)
		}
		if fmt.Sprint(sortedRows(rows)) != fmt.Sprint(sortedRows(rows2)) {
			t.Fatalf("rows changed over a render: %v vs %v", rows, rows2)
		}
	})
}

func sortedRows(rs []policy.BindRule) []string {
	out := ruleStrings(rs)
	return out
}
