package enforcer

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/landlock"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func mustParse(t testing.TB, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.cfg", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror: %v", src, err)
	}
	return p
}

func TestCheckEnforceable(t *testing.T) {
	p := mustParse(t, `[read]
/usr
[restructure]
/tmp
[connect]
allow 127.0.0.1:8080
allow 127.0.0.1:5353 udp
[bind]
allow 0
allow 53 udp
`)
	for _, tc := range []struct {
		abi  int
		want []string
	}{
		{1, []string{
			"[restructure] /tmp needs Landlock ABI 2",
			"[connect] allow 127.0.0.1:8080 needs Landlock ABI 4",
			"[connect] allow 127.0.0.1:5353 udp needs Landlock ABI 10",
			"[bind] allow 53 udp needs Landlock ABI 10",
		}},
		{3, []string{
			"[connect] allow 127.0.0.1:8080 needs Landlock ABI 4",
			"[connect] allow 127.0.0.1:5353 udp needs Landlock ABI 10",
			"[bind] allow 53 udp needs Landlock ABI 10",
		}},
		{7, []string{
			"[connect] allow 127.0.0.1:5353 udp needs Landlock ABI 10",
			"[bind] allow 53 udp needs Landlock ABI 10",
		}},
		{9, []string{
			"[connect] allow 127.0.0.1:5353 udp needs Landlock ABI 10",
			"[bind] allow 53 udp needs Landlock ABI 10",
		}},
		{10, nil},
		{11, nil},
	} {
		got := CheckEnforceable(p, landlock.ABITable[tc.abi])
		var gotS []string
		for _, u := range got {
			s := u.String()
			gotS = append(gotS, s[:strings.Index(s, " (")])
		}
		if !reflect.DeepEqual(gotS, tc.want) {
			t.Errorf("CheckEnforceable(ABI %d) =\n%q\nwant\n%q", tc.abi, gotS, tc.want)
		}
	}
}

// fakeFS is a StatFunc over a fixed map.
type fakeFS map[string]FileKind

func (f fakeFS) stat(path string, follow bool) (FileKind, error) {
	k, ok := f[path]
	if !ok {
		return KindMissing, nil
	}
	if k == KindSymlink && follow {
		return KindFile, nil
	}
	return k, nil
}

func TestCompile(t *testing.T) {
	fs := fakeFS{"/usr": KindDir, "/etc/passwd": KindFile, "/tmp": KindDir, "/dev/null": KindFile, "/var/run": KindSymlink}
	p := mustParse(t, `[read]
/usr
/etc/passwd
/nonexistent
[execute]
/usr
[write]
/dev/null
[create]
/tmp
[restructure]
/tmp
[ioctl]
/dev/null
[bind]
allow 0
allow 8080
[connect]
allow 127.0.0.1:443
`)
	for _, tc := range []struct {
		abi       int
		wantPaths []PathRule
		wantNet   string
		wantPorts []PortRule
		handled   string
	}{
		{7, []PathRule{
			{Path: "/dev/null", Access: landlock.FSWriteFile | landlock.FSTruncate | landlock.FSIoctlDev, NoFollow: true},
			{Path: "/etc/passwd", Access: landlock.FSReadFile},
			{Path: "/tmp", Access: landlock.FSMakeReg | landlock.FSMakeDir | landlock.FSRemoveFile | landlock.FSRemoveDir | landlock.FSRefer, NoFollow: true},
			{Path: "/usr", Access: landlock.FSReadFile | landlock.FSReadDir | landlock.FSExecute},
		}, "tcp-ports,hosts-by-port", []PortRule{{0, landlock.NetBindTCP}, {443, landlock.NetConnectTCP}, {8080, landlock.NetBindTCP}}, "fs,net,scope"},
		{2, []PathRule{
			{Path: "/dev/null", Access: landlock.FSWriteFile, NoFollow: true},
			{Path: "/etc/passwd", Access: landlock.FSReadFile},
			{Path: "/tmp", Access: landlock.FSMakeReg | landlock.FSMakeDir | landlock.FSRemoveFile | landlock.FSRemoveDir | landlock.FSRefer, NoFollow: true},
			{Path: "/usr", Access: landlock.FSReadFile | landlock.FSReadDir | landlock.FSExecute},
		}, "unrestricted", nil, "fs"},
	} {
		p := p
		if tc.abi < landlock.ABINetwork {
			p = p.Clone()
			p.Connect, p.Bind = nil, nil
		}
		rs, err := Compile(p, landlock.ABITable[tc.abi], false, fs.stat)
		if err != nil {
			t.Fatalf("Compile(ABI %d) error: %v", tc.abi, err)
		}
		if !reflect.DeepEqual(rs.Paths, tc.wantPaths) {
			t.Errorf("Compile(ABI %d).Paths =\n%+v\nwant\n%+v", tc.abi, rs.Paths, tc.wantPaths)
		}
		if rs.Net != tc.wantNet || !reflect.DeepEqual(rs.Ports, tc.wantPorts) {
			t.Errorf("Compile(ABI %d) net = %q %+v, want %q %+v", tc.abi, rs.Net, rs.Ports, tc.wantNet, tc.wantPorts)
		}
		if rs.Handled() != tc.handled {
			t.Errorf("Compile(ABI %d).Handled() = %q, want %q", tc.abi, rs.Handled(), tc.handled)
		}
		if rs.HandledFS != landlock.ABITable[tc.abi].FS || rs.Scoped != landlock.ABITable[tc.abi].Scope {
			t.Errorf("Compile(ABI %d) handles fs=%#x scope=%#x, want every right of the row fs=%#x scope=%#x", tc.abi, rs.HandledFS, rs.Scoped, landlock.ABITable[tc.abi].FS, landlock.ABITable[tc.abi].Scope)
		}
		if !reflect.DeepEqual(rs.Missing, []string{"/nonexistent"}) {
			t.Errorf("Compile(ABI %d).Missing = %q, want [/nonexistent]", tc.abi, rs.Missing)
		}
	}
}

func TestCompileRefusesEveryProblem(t *testing.T) {
	fs := fakeFS{"/etc/passwd": KindFile, "/var/run": KindSymlink}
	p := mustParse(t, `[create]
/etc/passwd
[write]
/var/run
[bind]
allow 53 udp
[read]
/usr
/usr/share
[execute]
/usr
`)
	_, err := Compile(p, landlock.ABITable[7], true, fs.stat)
	var ue *UnenforceableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnenforceable) || Status(err) != StatusRefused {
		t.Fatalf("Compile error = %v, want an UnenforceableError (exit 125)", err)
	}
	want := []string{"ABI 10", "/etc/passwd is not a directory", "/var/run is a symbolic link", `"/usr/share" is granted "r" but lies beneath "/usr", which is granted the wider "rx"`}
	if len(ue.Problems) != len(want) {
		t.Fatalf("problems = %q, want %d", ue.Problems, len(want))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if _, err := Compile(mustParse(t, "[read]\n/usr\n"), landlock.ABITable[6], true, fs.stat); err == nil || !strings.Contains(err.Error(), "ABI 7") {
		t.Errorf("Compile(--log-subprocesses, ABI 6) error = %v, want a refusal naming ABI 7", err)
	}
}

func TestCompileWildcardConnect(t *testing.T) {
	p := mustParse(t, "[connect]\nallow 127.0.0.1:*\nallow localhost:8080\n[bind]\nallow 0\n")
	rs, err := Compile(p, landlock.ABITable[7], false, fakeFS{}.stat)
	if err != nil {
		t.Fatal(err)
	}
	if rs.HandledNet != landlock.NetBindTCP || rs.Net != "tcp-bind-ports,tcp-connect-any,hosts-by-port" {
		t.Errorf("wildcard connect: handled net %#x %q, want only BIND_TCP and the description saying so", rs.HandledNet, rs.Net)
	}
	if !reflect.DeepEqual(rs.Ports, []PortRule{{0, landlock.NetBindTCP}}) {
		t.Errorf("ports = %+v, want only bind 0", rs.Ports)
	}
	// ABI 10: a UDP connect rule also grants the auto-bind (BIND_UDP on port 0).
	p = mustParse(t, "[connect]\nallow 127.0.0.1:53 udp\n")
	rs, err = Compile(p, landlock.ABITable[10], false, fakeFS{}.stat)
	if err != nil {
		t.Fatal(err)
	}
	want := []PortRule{{0, landlock.NetBindUDP}, {53, landlock.NetConnectSendUDP}}
	if !reflect.DeepEqual(rs.Ports, want) || rs.Net != "tcp-ports,udp-ports,hosts-by-port" {
		t.Errorf("UDP connect at ABI 10: ports %+v net %q, want %+v and tcp-ports,udp-ports,hosts-by-port", rs.Ports, rs.Net, want)
	}
}

func TestLimitsOf(t *testing.T) {
	p := mustParse(t, "[limits]\ntimeout=1.500\ncpu=10\nmem_mb=0\nnproc=64\nnofile=256\nfsize_mb=16\n")
	rl, timeout, nproc, mem := limitsOf(p.Limits)
	if timeout.Milliseconds() != 1500 || nproc != 64 || mem != 0 {
		t.Errorf("limitsOf: timeout %v nproc %d mem %d, want 1.5s 64 0 (mem_mb=0 is off)", timeout, nproc, mem)
	}
	names := []string{}
	for _, r := range rl {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, []string{"cpu", "nproc", "nofile", "fsize_mb"}) || rl[3].Value != 16<<20 {
		t.Errorf("rlimits = %+v, want cpu nproc nofile fsize_mb (16 MiB)", rl)
	}
}

func TestDescribe(t *testing.T) {
	rs, err := Compile(mustParse(t, "[read]\n/usr\n/gone\n[bind]\nallow 0\n"), landlock.ABITable[7], false, fakeFS{"/usr": KindDir}.stat)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rs.Describe(), "\n")
	for _, w := range []string{
		"handled net: BIND_TCP|CONNECT_TCP",
		"scoped: ABSTRACT_UNIX_SOCKET|SIGNAL",
		"path /usr: READ_FILE|READ_DIR",
		"port 0: BIND_TCP",
		"missing /gone",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("Describe() =\n%s\nlacks %q", got, w)
		}
	}
	last := landlock.ABITable[len(landlock.ABITable)-1]
	if fs, net := strings.Count(FSRightNames(last.FS), "|")+1, strings.Count(NetRightNames(last.Net), "|")+1; fs != 17 || net != 4 {
		t.Errorf("the last ABI's rights have %d fs and %d net names; want 17 and 4 (one per right)", fs, net)
	}
}

// TestCompileTestdataBases compiles every policy of testdata/policies for
// every ABI row with a stat that says every path is a directory: a base
// must never be refused for its shape (only for rules an old ABI lacks).
func TestCompileTestdataBases(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "policies", "*.cfg"))
	if len(files) == 0 {
		t.Fatal("no ../testdata/policies/*.cfg: the bases this test compiles are missing")
	}
	dirs := func(string, bool) (FileKind, error) { return KindDir, nil }
	for _, f := range files {
		p, err := policy.ParseFile(f)
		if err != nil {
			continue // a deliberately broken policy is the policy package's test
		}
		for _, row := range landlock.ABITable[1:] {
			_, err := Compile(p, row, false, dirs)
			var ue *UnenforceableError
			if errors.As(err, &ue) {
				for _, pr := range ue.Problems {
					if !strings.Contains(pr, "needs Landlock ABI") {
						t.Errorf("%s at ABI %d: %s", filepath.Base(f), row.Version, pr)
					}
				}
			} else if err != nil {
				t.Errorf("%s at ABI %d: %v", filepath.Base(f), row.Version, err)
			}
		}
	}
}
