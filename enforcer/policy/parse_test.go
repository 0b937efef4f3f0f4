package policy

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// policyFiles are the realistic policies of the repository's testdata.
func policyFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../../testdata/policies/*.cfg")
	if err != nil || len(files) < 4 {
		t.Fatalf("testdata policies: %v, %d files; want at least 4", err, len(files))
	}
	return files
}

func TestRoundTripGolden(t *testing.T) {
	for _, f := range policyFiles(t) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(name, src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			out := p.Render()
			q, err := Parse(name, out)
			if err != nil {
				t.Fatalf("Parse(Render(p)): %v\n%s", err, out)
			}
			if !q.Equal(p) {
				t.Fatalf("Parse(Render(p)) != p\nrendered:\n%s", out)
			}
			if again := q.Render(); string(again) != string(out) {
				t.Fatalf("Render is not stable:\nfirst:\n%s\nsecond:\n%s", out, again)
			}
			if q.Hash() != p.Hash() {
				t.Fatalf("hash changed over a round trip: %s, %s", p.Hash(), q.Hash())
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(name, ".cfg")+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if string(want) != string(out) {
				t.Fatalf("Render(%s) differs from %s (go test -update, then review the diff):\ngot:\n%s", name, golden, out)
			}
			// A golden renders to itself.
			g, err := Parse(golden, want)
			if err != nil || string(g.Render()) != string(want) {
				t.Fatalf("golden %s does not render to itself: %v", golden, err)
			}
		})
	}
}

func TestBasesAreRealistic(t *testing.T) {
	java, err := ParseFile("../../testdata/policies/BaseLanguage-java.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/proc/self/cgroup", "/sys/fs/cgroup/memory.max"} {
		if !java.FS[want][Read] {
			t.Errorf("java base lacks [read] %s", want)
		}
	}
	if len(java.Paths(Restructure)) == 0 {
		t.Error("java base has no [restructure]")
	}
	if len(java.Connect) != 1 || java.Connect[0] != (ConnectRule{Host: "127.0.0.1", Transport: TCP, Comment: java.Connect[0].Comment}) {
		t.Errorf("java base [connect] = %+v, want allow 127.0.0.1:*", java.Connect)
	}
	if len(java.Bind) != 1 || java.Bind[0].Port != 0 || java.Bind[0].Transport != TCP {
		t.Errorf("java base [bind] = %+v, want allow 0", java.Bind)
	}
}

// TestRefusals covers every lexing refusal and grammar error: each row names
// the input, the line the problem must be reported at, and words the message
// must hold.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		Name string
		Src  string
		Line int
		Want string
	}{
		{"bom", "\xef\xbb\xbf[read]\n/usr\n", 1, "byte order mark"},
		{"nul", "[read]\n/us\x00r\n", 2, "NUL byte"},
		{"cr", "[read]\n/usr\r\n", 2, "Windows line ending"},
		{"cr mid line", "[read]\n/u\rsr\n", 2, "Windows line ending"},
		{"row before section", "/usr\n[read]\n", 1, "before any [section]"},
		{"unknown section", "[readonly]\n/usr\n", 1, "unknown section [readonly]"},
		{"spaced section", "[ read ]\n", 1, "unknown section [ read ]"},
		{"old network section", "[network]\nallow localhost\n", 1, "unknown section [network]"},
		{"empty brackets", "[read]\n[]\n", 2, "not a section header"},
		{"unclosed header", "[read\n", 1, "not a section header"},
		{"accept", "[accept]\nexpose 8443 to 8080 from 10.0.0.0/8\n", 1, "no inbound proxy"},
		{"relative path", "[read]\nusr/lib\n", 2, "not absolute"},
		{"home path", "[read]\n~/x\n", 2, "not absolute"},
		{"glob star", "[read]\n/usr/*\n", 2, "glob character"},
		{"glob question", "[write]\n/tmp/a?\n", 2, "glob character"},
		{"glob bracket", "[write]\n/tmp/a[1]\n", 2, "glob character"},
		{"dot dot", "[read]\n/usr/../etc\n", 2, "not in normal form"},
		{"double slash", "[read]\n//usr\n", 2, "not in normal form"},
		{"trailing slash", "[read]\n/usr/\n", 2, "not in normal form"},
		{"dot", "[read]\n/usr/./lib\n", 2, "not in normal form"},
		{"control char", "[read]\n/usr\x01lib\n", 2, "control"},
		{"del char", "[read]\n/usr\x7flib\n", 2, "control"},
		{"nel", "[read]\n/usr\u0085lib\n", 2, "control"},
		{"line separator", "[read]\n/usr\u2028lib\n", 2, "control"},
		{"not utf8", "[read]\n/usr/\xfflib\n", 2, "UTF-8"},
		{"connect not allow", "[connect]\npermit localhost\n", 2, "is not allow"},
		{"connect bare allow", "[connect]\nallow\n", 2, "is not allow"},
		{"connect three words", "[connect]\nallow a:1 tcp x\n", 2, "3 words"},
		{"connect bad transport", "[connect]\nallow localhost:80 sctp\n", 2, "neither tcp nor udp"},
		{"connect transport case", "[connect]\nallow localhost:80 UDP\n", 2, "neither tcp nor udp"},
		{"connect wildcard name", "[connect]\nallow *.example.org:443\n", 2, "wildcard"},
		{"connect bare star", "[connect]\nallow *\n", 2, "names no port"},
		{"connect empty port", "[connect]\nallow example.org:\n", 2, "no port"},
		{"connect empty port v6", "[connect]\nallow [::1]:\n", 2, "no port"},
		{"connect unclosed bracket", "[connect]\nallow [::1:80\n", 2, "never closes"},
		{"connect junk after bracket", "[connect]\nallow [::1]x\n", 2, "after the bracketed host"},
		{"connect bracketed v4", "[connect]\nallow [127.0.0.1]:80\n", 2, "not an IPv6"},
		{"connect no host", "[connect]\nallow :80\n", 2, "names no host"},
		{"connect short v4", "[connect]\nallow 127.1:80\n", 2, "not an IPv4"},
		{"connect v4 leading zero", "[connect]\nallow 127.0.0.01:80\n", 2, "not an IPv4"},
		{"connect v4 octet", "[connect]\nallow 10.0.0.256:80\n", 2, "not an IPv4"},
		{"connect v6 zone", "[connect]\nallow [fe80::1%eth0]:80\n", 2, "not an IPv6"},
		{"connect v6 bad", "[connect]\nallow [::g]:80\n", 2, "not an IPv6"},
		{"connect prefix zero", "[connect]\nallow 10.0.0.0/0:80\n", 2, "write * for every host"},
		{"connect prefix long", "[connect]\nallow 10.0.0.0/33:80\n", 2, "longer than the address"},
		{"connect prefix digits", "[connect]\nallow 10.0.0.0/1234:80\n", 2, "prefix"},
		{"connect prefix v6 long", "[connect]\nallow [::1/129]:80\n", 2, "longer than the address"},
		{"connect mapped prefix", "[connect]\nallow [::ffff:10.0.0.0/95]:80\n", 2, "IPv4-mapped"},
		{"connect cidr bad addr", "[connect]\nallow 10.0/8:80\n", 2, "not an IPv4"},
		{"connect port zero", "[connect]\nallow example.org:0\n", 2, "not 1-65535"},
		{"connect port leading zero", "[connect]\nallow example.org:080\n", 2, "not 1-65535"},
		{"connect port big", "[connect]\nallow example.org:65536\n", 2, "not 1-65535"},
		{"connect port word", "[connect]\nallow example.org:http\n", 2, "not 1-65535"},
		{"connect no port remote", "[connect]\nallow example.org\n", 2, "names no port"},
		{"connect range loopback wildcard", "[connect]\nallow 127.0.0.1/1\n", 2, "names no port"},
		{"connect loopback range", "[connect]\nallow 127.0.0.0/8\n", 2, "names no port"},
		{"connect bad name", "[connect]\nallow ex!ample.org:80\n", 2, "neither an address nor a host name"},
		{"connect empty label", "[connect]\nallow example..org:80\n", 2, "empty or over-long label"},
		{"bind not allow", "[bind]\nlisten 80\n", 2, "is not allow"},
		{"bind bare", "[bind]\nallow\n", 2, "is not allow"},
		{"bind address", "[bind]\nallow 127.0.0.1:80\n", 2, "binds by port only"},
		{"bind double zero", "[bind]\nallow 00\n", 2, "without leading zeros"},
		{"bind leading zero", "[bind]\nallow 007 udp\n", 2, "without leading zeros"},
		{"bind big", "[bind]\nallow 65536\n", 2, "without leading zeros"},
		{"bind transport", "[bind]\nallow 80 quic\n", 2, "neither tcp nor udp"},
		{"bind four words", "[bind]\nallow 80 tcp x\n", 2, "is not allow"},
		{"bind arabic digits", "[bind]\nallow \u0665000 udp\n", 2, "is not a port"},
		{"limits bare value", "[limits]\n90\n", 2, "not key=value"},
		{"limits unknown key", "[limits]\nwall=90\n", 2, "unknown key"},
		{"limits negative", "[limits]\ncpu=-1\n", 2, "ASCII digits"},
		{"limits empty", "[limits]\ncpu=\n", 2, "ASCII digits"},
		{"limits fraction", "[limits]\nnproc=1.5\n", 2, "ASCII digits"},
		{"limits timeout one decimal", "[limits]\ntimeout=1.5\n", 2, "three decimals"},
		{"limits timeout four decimals", "[limits]\ntimeout=1.5000\n", 2, "three decimals"},
		{"limits timeout digits", "[limits]\ntimeout=1234567890123456\n", 2, "more than 15"},
		{"limits digits", "[limits]\nnofile=1234567890123456789\n", 2, "more than 18"},
		{"limits mem big", "[limits]\nmem_mb=8796093022208\n", 2, "larger than"},
		{"limits fsize big", "[limits]\nfsize_mb=9000000000000\n", 2, "larger than"},
		{"limits non ascii", "[limits]\ncpu=\u0661\n", 2, "ASCII digits"},
		// Nanoseconds past int64: 2^64 ns wrapped to a 290 ms limit,
		// 2^63 ns to a negative one, which meant none.
		{"limits timeout wraps to 290ms", "[limits]\ntimeout=18446744074\n", 2, "more than 1000000000 seconds"},
		{"limits timeout wraps negative", "[limits]\ntimeout=9223372037\n", 2, "more than 1000000000 seconds"},
		{"limits timeout past max", "[limits]\ntimeout=1000000000.001\n", 2, "more than 1000000000 seconds"},
		{"limits cpu past max", "[limits]\ncpu=1000000001\n", 2, "more than 1000000000 seconds"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			p, err := Parse("t.cfg", []byte(tc.Src))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, nil; want an error with %q", tc.Src, p, tc.Want)
			}
			if p != nil {
				t.Fatalf("Parse(%q) returned a policy beside an error", tc.Src)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("Parse(%q) = %v; want exactly one problem", tc.Src, err)
			}
			e := list[0]
			if e.File != "t.cfg" || e.Line != tc.Line || !strings.Contains(e.Msg, tc.Want) {
				t.Fatalf("Parse(%q) = %q at %s:%d; want line %d with %q", tc.Src, e.Msg, e.File, e.Line, tc.Line, tc.Want)
			}
		})
	}
}

func TestAccepted(t *testing.T) {
	for _, tc := range []struct {
		Name, Src, Render string
	}{
		{"comment cuts path", "[read]\n/usr#x\n", "[read]\n# x\n/usr\n"},
		{"spaces trimmed", "  [read]  \n\t/usr \v\n", "[read]\n/usr\n"},
		{"no final newline", "[read]\n/usr", "[read]\n/usr\n"},
		{"root path", "[read]\n/\n", "[read]\n/\n"},
		{"space inside path", "[read]\n/srv/my data\n", "[read]\n/srv/my data\n"},
		{"empty section", "[read]\n[write]\n/tmp\n", "[write]\n/tmp\n"},
		{"loopback wildcard forms", "[connect]\nallow localhost\nallow localhost:*\nallow [::1]\nallow 127.0.0.1/32\nallow [::1/128]:*\n",
			"[connect]\nallow 127.0.0.1/32:*\nallow [::1]:*\nallow [::1/128]:*\nallow localhost:*\n"},
		{"every host one port", "[connect]\nallow *:443\n", "[connect]\nallow *:443\n"},
		{"wildcard beside port", "[connect]\nallow 127.0.0.1:*\nallow 192.0.2.10:443\n", "[connect]\nallow 127.0.0.1:*\nallow 192.0.2.10:443\n"},
		{"v6 canonical", "[connect]\nallow [2001:DB8:0::1]:443\n", "[connect]\nallow [2001:db8::1]:443\n"},
		{"name lower case", "[connect]\nallow Example.ORG:443 tcp\n", "[connect]\nallow example.org:443\n"},
		{"duplicate rules", "[bind]\nallow 80\nallow 80 tcp\nallow 80 udp\n", "[bind]\nallow 80\nallow 80 udp\n"},
		{"limits zero wins", "[limits]\ncpu=10\ncpu=000\ncpu=20\n", "[limits]\ncpu=0\n"},
		{"limits max", "[limits]\ntimeout=2.500\ntimeout = 2\nnproc=5\nnproc=07\n", "[limits]\ntimeout=2.500\nnproc=7\n"},
		{"limits zero timeout", "[limits]\ntimeout=0.000\n", "[limits]\ntimeout=0\n"},
		{"comment escaping", "[read]\n# caf\u00e9 # menu\n/usr\n", "[read]\n# caf\\xc3\\xa9 \\x23 menu\n/usr\n"},
		{"pending comment reset by blank", "[read]\n# lost\n\n/usr\n", "[read]\n/usr\n"},
		{"header", "# one\n#\n# three\n\n[read]\n/usr\n", "# one\n#\n# three\n\n[read]\n/usr\n"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			p, err := Parse("t.cfg", []byte(tc.Src))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.Src, err)
			}
			if got := string(p.Render()); got != tc.Render {
				t.Fatalf("Render(Parse(%q)) =\n%s\nwant\n%s", tc.Src, got, tc.Render)
			}
		})
	}
}

func TestFiveProblems(t *testing.T) {
	src, err := os.ReadFile("testdata/five-problems.cfg")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("five-problems.cfg", src)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Parse = %v; want an ErrorList", err)
	}
	want := []struct {
		line int
		msg  string
	}{
		{3, "glob character"}, {6, "unknown section [network]"}, {10, "names no port"}, {13, "without leading zeros"}, {16, "unknown key"},
	}
	if len(list) != len(want) {
		t.Fatalf("Parse reported %d problems:\n%v\nwant %d", len(list), err, len(want))
	}
	for i, w := range want {
		if list[i].Line != w.line || !strings.Contains(list[i].Msg, w.msg) {
			t.Errorf("problem %d = %v; want line %d with %q", i, list[i], w.line, w.msg)
		}
		if !strings.HasPrefix(list[i].Error(), "five-problems.cfg:") {
			t.Errorf("problem %d = %q; want file:line: prefix", i, list[i].Error())
		}
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 5 {
		t.Errorf("Error() has %d lines; want one per problem", len(lines))
	}
}

func TestParseFileRefusals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.cfg")
	if err := os.WriteFile(good, []byte("[read]\n/usr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.cfg")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.cfg")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ Name, Path, Want string }{
		{"empty", "", "empty policy path"},
		{"missing", filepath.Join(dir, "missing.cfg"), "does not exist"},
		{"dangling", dangling, "dangling symbolic link"},
		{"directory", dir, "is a directory"},
		{"fifo", fifo, "not a regular file"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			p, err := ParseFile(tc.Path)
			if err == nil || p != nil || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("ParseFile(%q) = %v, %v; want %q", tc.Path, p, err, tc.Want)
			}
		})
	}
	if _, err := ParseFile(good); err != nil {
		t.Fatalf("ParseFile(good) = %v", err)
	}
	if os.Geteuid() != 0 { // root reads a mode-000 file anyway
		unreadable := filepath.Join(dir, "unreadable.cfg")
		if err := os.WriteFile(unreadable, []byte("[read]\n"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseFile(unreadable); err == nil || !strings.Contains(err.Error(), "cannot be read") {
			t.Fatalf("ParseFile(unreadable) = %v; want cannot be read", err)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bases := filepath.Join(dir, "bases")
	if err := os.Mkdir(bases, 0o755); err != nil {
		t.Fatal(err)
	}
	write("bases/BaseB.cfg", "[read]\n/b\n[connect]\nallow localhost\n[limits]\ntimeout=10\nnproc=0\n")
	write("bases/BaseA.cfg", "[read]\n/a\n[limits]\ntimeout=20\n")
	write("bases/Other.cfg", "[read]\n/never\n")
	ex1 := write("ex1.cfg", "[write]\n/a\n[bind]\nallow 0\n[limits]\ntimeout=5\nnproc=64\ncpu=30\n")
	ex2 := write("ex2.cfg", "[limits]\ncpu=60\n")

	p, err := Load(bases, []string{ex1, ex2})
	if err != nil {
		t.Fatal(err)
	}
	want := "[read]\n/a\n/b\n\n[write]\n/a\n\n[connect]\nallow localhost:*\n\n[bind]\nallow 0\n\n[limits]\ntimeout=20\ncpu=60\nnproc=0\n"
	if got := string(p.Render()); got != want {
		t.Fatalf("Load =\n%s\nwant\n%s", got, want)
	}
	// Without configs, the bases' network rows are dropped (no network
	// without an exercise config).
	p, err = Load(bases, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Connect) != 0 || len(p.Bind) != 0 || !p.FS["/a"][Read] {
		t.Fatalf("Load(bases, nil) = %s; want filesystem only", p.Render())
	}
	// Problems of every file at once.
	bad1 := write("bad1.cfg", "[read]\nrel\n")
	bad2 := write("bad2.cfg", "[bind]\nallow 00\n")
	_, err = Load(dir, []string{bad1, bad2, filepath.Join(dir, "missing.cfg")})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 4 {
		t.Fatalf("Load with problems = %v; want 4 problems (no base, two rows, a missing file)", err)
	}
	if p, err := Load("", []string{ex2}); err != nil || p.Limits[CPU].Value != 60 {
		t.Fatalf("Load(\"\", ex2) = %v, %v", p, err)
	}
}

func TestLimitDuration(t *testing.T) {
	for _, tc := range []struct {
		Key  LimitKey
		L    Limit
		Want time.Duration
		Err  string
	}{
		{Timeout, Limit{Value: 1500}, 1500 * time.Millisecond, ""},
		{CPU, Limit{Value: 30}, 30 * time.Second, ""},
		{Timeout, Limit{Off: true}, 0, ""},
		{CPU, Limit{Value: MaxSeconds}, MaxSeconds * time.Second, ""},
		// Built in code past what Parse accepts: refused, never wrapped.
		{Timeout, Limit{Value: 18446744074000}, 0, "does not fit a duration"},
		{CPU, Limit{Value: 9223372037}, 0, "does not fit a duration"},
		{Timeout, Limit{Value: -1}, 0, "does not fit a duration"},
		{NProc, Limit{Value: 5}, 0, "not a duration"},
	} {
		got, err := tc.L.Duration(tc.Key)
		if got != tc.Want || (err == nil) != (tc.Err == "") || err != nil && !strings.Contains(err.Error(), tc.Err) {
			t.Errorf("%+v.Duration(%s) = %v, %v; want %v, error with %q", tc.L, tc.Key, got, err, tc.Want, tc.Err)
		}
	}
}

// TestLoadBaseDirIsLiteral holds --base-dir to one directory: glob
// characters in its name are part of the name (a "bases*" once merged every
// bases… directory beside it), and a missing one says so.
func TestLoadBaseDirIsLiteral(t *testing.T) {
	dir := t.TempDir()
	for name, row := range map[string]string{"bases*": "/literal", "bases-other": "/other", "[b]": "/bracket", "b": "/b"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "Base.cfg"), []byte("[read]\n"+row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ Dir, Want string }{
		{"bases*", "[read]\n/literal\n"},
		{"[b]", "[read]\n/bracket\n"},
	} {
		p, err := Load(filepath.Join(dir, tc.Dir), nil)
		if err != nil || string(p.Render()) != tc.Want {
			t.Errorf("Load(%q) = %v\n%s\nwant only the bases of that one directory:\n%s", tc.Dir, err, renderOrNil(p), tc.Want)
		}
	}
	file := filepath.Join(dir, "b", "Base.cfg")
	for _, tc := range []struct{ Dir, Want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{filepath.Join(dir, "missing*"), "does not exist"},
		{file, "is not a directory"},
	} {
		if _, err := Load(tc.Dir, nil); err == nil || !strings.Contains(err.Error(), tc.Want) {
			t.Errorf("Load(%q) = %v; want an error saying it %s", tc.Dir, err, tc.Want)
		}
	}
}

func renderOrNil(p *Policy) string {
	if p == nil {
		return "(nil)"
	}
	return string(p.Render())
}
