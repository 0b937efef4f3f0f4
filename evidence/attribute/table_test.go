package attribute

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// inDomain prefixes a trace with a successful landlock_restrict_self of
// pid 7, so that its calls are inside the domain.
const inDomain = "7 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0) = 0\n"

func attributeTrace(t *testing.T, trace string, opts Options) []*Refusal {
	t.Helper()
	var calls []*strace.Call
	p := strace.NewParser(strings.NewReader(trace))
	for c, err := range p.All() {
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		calls = append(calls, c)
	}
	if opts.Lstat == nil {
		opts.Lstat = fakeFS{"/w": fs.ModeDir, "/w/exists": 0, "/w/d": fs.ModeDir, "/w/d/sub": fs.ModeDir}.Lstat
	}
	return Refusals(calls, opts)
}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		Name  string
		Trace string
		Want  []string
	}{{
		Name:  "outside the domain nothing counts",
		Trace: `7 openat(AT_FDCWD</w>, "/etc/shadow", O_RDONLY) = -1 EACCES (Permission denied)` + "\n",
	}, {
		Name:  "ordinary errors are not refusals",
		Trace: inDomain + `7 openat(AT_FDCWD</w>, "/nope", O_RDONLY) = -1 ENOENT (No such file or directory)` + "\n",
	}, {
		Name: "relative path against the -y directory and a chdir",
		Trace: inDomain + `7 openat(3</w/d>, "sub/f", O_RDONLY) = -1 EACCES (Permission denied)
7 chdir("/w/d") = 0
7 mkdir("new", 0777) = -1 EACCES (Permission denied)
`,
		Want: []string{"filesystem read /w/d/sub/f:read=read_file", "filesystem create /w/d:create=make_dir"},
	}, {
		Name: "working directory passes to a child",
		Trace: inDomain + `7 chdir("/w") = 0
7 fork() = 8
8 unlink("x") = -1 EACCES (Permission denied)
`,
		Want: []string{"filesystem delete /w:delete=remove_file"},
	}, {
		Name: "EPERM never becomes a grant, setsid is fixed",
		Trace: inDomain + `7 openat(AT_FDCWD</w>, "/w/exists", O_RDONLY) = -1 EPERM (Operation not permitted)
7 setsid() = -1 EPERM (Operation not permitted)
7 kill(1, SIGTERM) = -1 EPERM (Operation not permitted)
`,
		Want: []string{"other openat", "fixed setsid", "other kill"},
	}, {
		Name: "open intents",
		Trace: inDomain + `7 openat(AT_FDCWD</w>, "exists", O_RDWR|O_TRUNC) = -1 EACCES (Permission denied)
7 open("/w/new", O_RDONLY|O_CREAT, 0644) = -1 EACCES (Permission denied)
7 creat("/w/new2", 0644) = -1 EACCES (Permission denied)
7 openat(AT_FDCWD</w>, "/w/d", O_RDONLY|O_PATH) = -1 EACCES (Permission denied)
7 openat(AT_FDCWD</w>, "/w/d", O_RDWR|O_TMPFILE, 0600) = -1 EACCES (Permission denied)
7 openat2(AT_FDCWD</w>, "/w/d", {flags=O_RDONLY|O_CLOEXEC, resolve=RESOLVE_NO_SYMLINKS, mode=0}, 24) = -1 EACCES (Permission denied)
`,
		Want: []string{
			"filesystem write /w/exists:read,write=read_file,write_file,truncate",
			"filesystem create /w:create=make_reg /w/new:read=read_file",
			"filesystem create /w:create=make_reg /w/new2:write=write_file",
			"other openat",
			"filesystem create /w/d:create=make_reg /w/d:write=write_file",
			"filesystem read /w/d:read=read_dir",
		},
	}, {
		Name: "mknod kinds",
		Trace: inDomain + `7 mknodat(AT_FDCWD</w>, "c", S_IFCHR|0600, makedev(0x1, 0x3)) = -1 EACCES (Permission denied)
7 mknod("/w/s", S_IFSOCK|0600) = -1 EACCES (Permission denied)
7 mknodat(AT_FDCWD</w>, "r", S_IFREG|0600) = -1 EACCES (Permission denied)
`,
		Want: []string{"fixed create", "filesystem create /w:create-ipc=make_sock", "filesystem create /w:create=make_reg"},
	}, {
		Name: "renames and links",
		Trace: inDomain + `7 renameat2(AT_FDCWD</w>, "/w/d/sub", AT_FDCWD</w>, "/w/exists", RENAME_EXCHANGE) = -1 EACCES (Permission denied)
7 rename("/w/exists", "/w/other") = -1 EACCES (Permission denied)
7 linkat(AT_FDCWD</w>, "/w/exists", AT_FDCWD</w>, "/w/d/l", 0) = -1 EXDEV (Invalid cross-device link)
7 link("/w/exists", "/w/d/l") = -1 EACCES (Permission denied)
7 rename("/w/a", "/w/b") = -1 EXDEV (Invalid cross-device link)
`,
		Want: []string{
			"filesystem rename /w/d:create,delete=remove_dir,make_reg /w:create,delete=remove_file,make_dir",
			"filesystem rename /w:create,delete=remove_file,make_reg",
			"filesystem link /w:restructure=refer /w/d:restructure=refer",
			"filesystem link /w/d:create=make_reg",
			"other rename",
		},
	}, {
		Name: "ioctl: pseudo-terminal requests only",
		Trace: inDomain + `7 ioctl(3</dev/pts/4>, TCGETS, 0x7ffc) = -1 EACCES (Permission denied)
7 ioctl(3</dev/pts/4>, TIOCSCTTY, 0) = -1 EACCES (Permission denied)
7 ioctl(0</dev/null>, TCGETS, 0x7ffc) = -1 EACCES (Permission denied)
7 ftruncate(4</w/exists>, 0) = -1 EACCES (Permission denied)
`,
		Want: []string{"filesystem ioctl /dev/pts/4:ioctl=ioctl_dev", "fixed ioctl", "fixed ioctl", "filesystem truncate /w/exists:write=truncate"},
	}, {
		// strace names 0x5403 by both its names; on a terminal it is
		// TCSETSW (less on /dev/tty), on another device it stays fixed.
		Name: "ioctl: an ambiguous request name is resolved by the descriptor's type",
		Trace: inDomain + `7 ioctl(3</dev/pts/4>, SNDCTL_TMR_STOP or TCSETSW, {c_iflag=ICRNL|IXON, c_cflag=B38400|CS8|CREAD, ...}) = -1 EACCES (Permission denied)
7 ioctl(5</dev/sequencer>, SNDCTL_TMR_STOP or TCSETSW, 0x1) = -1 EACCES (Permission denied)
`,
		Want: []string{"filesystem ioctl /dev/pts/4:ioctl=ioctl_dev", "fixed ioctl"},
	}, {
		Name: "network: transports, UNIX sockets, autobind",
		Trace: inDomain + `7 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC, IPPROTO_IP) = 5<socket:[100]>
7 connect(5<socket:[100]>, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.53")}, 16) = -1 EACCES (Permission denied)
7 socket(AF_INET, SOCK_DGRAM, IPPROTO_IP) = 6<socket:[101]>
7 bind(6<socket:[101]>, {sa_family=AF_INET, sin_port=htons(0), sin_addr=inet_addr("0.0.0.0")}, 16) = 0
7 sendto(6<socket:[101]>, "x", 1, 0, {sa_family=AF_INET, sin_port=htons(9), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EACCES (Permission denied)
7 connect(9<TCP:[555]>, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 EACCES (Permission denied)
7 connect(10<socket:[900]>, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = -1 EACCES (Permission denied)
7 connect(10<socket:[900]>, {sa_family=AF_UNIX, sun_path=@"abs"}, 6) = -1 EPERM (Operation not permitted)
7 connect(11<socket:[901]>, {sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, 12) = -1 EACCES (Permission denied)
7 socket(AF_PACKET, SOCK_RAW, 768) = -1 EACCES (Permission denied)
7 bind(12<socket:[902]>, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EACCES (Permission denied)
`,
		Want: []string{
			"network connect connect:127.0.0.53:53/udp bind:invalid IP:0/udp",
			"network sendto connect:127.0.0.1:9/udp",
			"network connect connect:::1:443/tcp",
			"filesystem connect /run/x.sock:read=resolve_unix",
			"other connect",
			"fixed connect",
			"fixed socket",
			"network bind bind:127.0.0.1:8080/tcp",
		},
	}, {
		Name: "limits",
		Trace: inDomain + `7 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = -1 EAGAIN (Resource temporarily unavailable)
7 pipe2(0x7ffc, O_CLOEXEC) = -1 EMFILE (Too many open files)
7 read(3</w/exists>, 0x1, 4) = -1 EAGAIN (Resource temporarily unavailable)
`,
		Want: []string{"limit clone nproc", "limit pipe2 nofile"},
	}, {
		Name: "/proc/self and /proc/thread-self name the refusing process",
		Trace: inDomain + `7 clone(child_stack=0x1, flags=CLONE_VM|CLONE_THREAD) = 9
9 openat(AT_FDCWD</w>, "/proc/thread-self/attr/current", O_RDONLY) = -1 EACCES (Permission denied)
9 openat(AT_FDCWD</w>, "/proc/self", O_RDONLY|O_DIRECTORY) = -1 EACCES (Permission denied)
`,
		Want: []string{"filesystem read /proc/7/task/9/attr/current:read=read_file", "filesystem read /proc/7:read=read_dir"},
	}} {
		t.Run(tc.Name, func(t *testing.T) {
			rs := attributeTrace(t, tc.Trace, Options{})
			var got []string
			for _, r := range rs {
				got = append(got, refusalKey(r))
				if r.Layer == Filesystem && len(r.Sections) == 0 {
					t.Errorf("%v: filesystem refusal without sections", r)
				}
				if r.Reason == "" {
					t.Errorf("%v: no reason", r)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.Want, "\n") {
				t.Errorf("refusals:\n got %q\nwant %q", got, tc.Want)
			}
		})
	}
}

func TestResolveOption(t *testing.T) {
	rs := attributeTrace(t, inDomain+`7 execve("/bin/sh", ["sh"], 0x1 /* 3 vars */) = -1 EACCES (Permission denied)`+"\n",
		Options{Resolve: func(p string) string { return strings.Replace(p, "/bin", "/usr/bin", 1) }})
	if len(rs) != 1 || len(rs[0].Paths) != 1 || rs[0].Paths[0] != "/usr/bin/sh" {
		t.Fatalf("refusals = %v, want one on /usr/bin/sh", rs)
	}
}

func TestResolveSymlinks(t *testing.T) {
	d := t.TempDir()
	if err := os.Mkdir(d+"/real", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", d+"/link"); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ In, Want string }{
		{d + "/link", real + "/real"},
		{d + "/link/new/file", real + "/real/new/file"},
		{d + "/real", real + "/real"},
		{"/proc/self/status", "/proc/self/status"},
		{"/dev/stdin", "/dev/stdin"},
	} {
		if got := ResolveSymlinks(tc.In); got != tc.Want {
			t.Errorf("ResolveSymlinks(%q) = %q, want %q", tc.In, got, tc.Want)
		}
	}
}

func TestPolicy(t *testing.T) {
	rs := attributeTrace(t, inDomain+`7 open("/w/new", O_WRONLY|O_CREAT, 0644) = -1 EACCES (Permission denied)
7 socket(AF_INET, SOCK_DGRAM, IPPROTO_IP) = 5<socket:[1]>
7 connect(5<socket:[1]>, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6_addr), sin6_scope_id=0}, 28) = -1 EACCES (Permission denied)
7 setsid() = -1 EPERM (Operation not permitted)
`, Options{})
	if len(rs) != 3 {
		t.Fatalf("got %d refusals, want 3", len(rs))
	}
	fsp := rs[0].Policy()
	if !fsp.FS["/w"][policy.Create] || !fsp.FS["/w/new"][policy.Write] || len(fsp.FS) != 2 {
		t.Errorf("filesystem grant = %v", fsp.FS)
	}
	np := rs[1].Policy()
	wantC := []policy.ConnectRule{{Host: "127.0.0.1", Port: 53, Transport: policy.UDP}}
	wantB := []policy.BindRule{{Port: 0, Transport: policy.UDP}}
	if !reflect.DeepEqual(np.Connect, wantC) || !reflect.DeepEqual(np.Bind, wantB) {
		t.Errorf("network grant = %+v %+v, want %+v %+v", np.Connect, np.Bind, wantC, wantB)
	}
	for _, p := range []*policy.Policy{fsp, np} {
		if _, err := policy.Parse("grant.cfg", p.Render()); err != nil {
			t.Errorf("the grant does not parse: %v\n%s", err, p.Render())
		}
	}
	if p := rs[2].Policy(); len(p.FS)+len(p.Connect)+len(p.Bind) != 0 {
		t.Errorf("a fixed refusal grants %+v", p)
	}
}

func TestNestedDomain(t *testing.T) {
	trace := inDomain + `7 execve("/bin/sh", ["sh"], 0x1 /* 1 var */) = 0
7 landlock_restrict_self(4<anon_inode:[landlock-ruleset]>, 0) = 0
7 openat(AT_FDCWD</w>, "/w/exists", O_RDONLY) = -1 EACCES (Permission denied)
`
	rs := attributeTrace(t, trace, Options{})
	if len(rs) != 1 || rs[0].Layer != Other || !strings.Contains(rs[0].Reason, "depth 2") {
		t.Errorf("nested refusal = %v", rs)
	}
	rs = attributeTrace(t, trace, Options{NestedDomains: true})
	if len(rs) != 1 || rs[0].Layer != Filesystem {
		t.Errorf("nested refusal with NestedDomains = %v", rs)
	}
}

// TestEnforcerDepth: an enforcer that stacks two domains before it
// executes the command sets the base depth; only what the command stacks
// beyond that is nested.
func TestEnforcerDepth(t *testing.T) {
	trace := inDomain + `7 landlock_restrict_self(4<anon_inode:[landlock-ruleset]>, 0) = 0
7 execve("/bin/sh", ["sh"], 0x1 /* 1 var */) = 0
7 openat(AT_FDCWD</w>, "/w/exists", O_RDONLY) = -1 EACCES (Permission denied)
7 landlock_restrict_self(5<anon_inode:[landlock-ruleset]>, 0) = 0
7 openat(AT_FDCWD</w>, "/w/exists", O_WRONLY) = -1 EACCES (Permission denied)
`
	rs := attributeTrace(t, trace, Options{})
	if len(rs) != 2 || rs[0].Layer != Filesystem || rs[1].Layer != Other {
		t.Errorf("refusals = %v, want a filesystem one at depth 2 and an other one at depth 3", rs)
	}
}

// TestCreateThroughLink: an O_CREAT open of a dangling link creates its
// target, so Landlock checks make_reg on the target's directory, which is
// what the refusal names; O_EXCL and O_NOFOLLOW do not follow the link,
// and a loop of links is left as written.
func TestCreateThroughLink(t *testing.T) {
	links := map[string]string{"/w/dangling": "/other/new", "/w/rel": "d/new", "/w/loop": "loop"}
	lstat := fakeFS{"/w": fs.ModeDir, "/w/d": fs.ModeDir, "/other": fs.ModeDir,
		"/w/dangling": fs.ModeSymlink, "/w/rel": fs.ModeSymlink, "/w/loop": fs.ModeSymlink}.Lstat
	readlink := func(p string) (string, error) {
		if t, ok := links[p]; ok {
			return t, nil
		}
		return "", os.ErrInvalid
	}
	rs := attributeTrace(t, inDomain+`7 openat(AT_FDCWD</w>, "dangling", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EACCES (Permission denied)
7 openat(AT_FDCWD</w>, "rel", O_WRONLY|O_CREAT, 0666) = -1 EACCES (Permission denied)
7 openat(AT_FDCWD</w>, "dangling", O_WRONLY|O_CREAT|O_NOFOLLOW, 0666) = -1 EACCES (Permission denied)
7 openat(AT_FDCWD</w>, "loop", O_WRONLY|O_CREAT, 0666) = -1 EACCES (Permission denied)
`, Options{Lstat: lstat, Readlink: readlink})
	want := []string{"/other", "/w/d", "/w/dangling", "/w/loop"}
	if len(rs) != len(want) {
		t.Fatalf("got %d refusals, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		if r.Needs[0].Path != want[i] {
			t.Errorf("refusal %d (%s) names %s first, want %s", i, r, r.Needs[0].Path, want[i])
		}
	}
	if rs[0].Op != "create" || !slices.Contains(rs[0].Rights, landlock.MakeReg) {
		t.Errorf("create through a dangling link = %s, want make_reg on /other", rs[0])
	}
}

// TestCreateHeld: an O_CREAT open refused in a directory whose make_reg the
// run's policy held made the file (Landlock checks make_reg first) and was
// refused the file's access; the file being gone afterwards (a cold run's
// overlay) must not turn it into a create refusal the policy already grants.
func TestCreateHeld(t *testing.T) {
	lstat := fakeFS{"/tmp": fs.ModeDir}.Lstat
	line := inDomain + `7 openat(AT_FDCWD</w>, "/tmp/ccAbc.s", O_RDWR|O_CREAT|O_EXCL, 0600) = -1 EACCES (Permission denied)
`
	for _, c := range []struct {
		held   bool
		op     string
		path   string
		rights []landlock.Right
	}{
		{false, "create", "/tmp", []landlock.Right{landlock.MakeReg}},
		{true, "write", "/tmp/ccAbc.s", []landlock.Right{landlock.ReadFile, landlock.WriteFile}},
	} {
		held := func(dir string) bool { return c.held && dir == "/tmp" }
		rs := attributeTrace(t, line, Options{Lstat: lstat, CreateHeld: held})
		if len(rs) != 1 {
			t.Fatalf("held=%v: got %d refusals, want 1", c.held, len(rs))
		}
		r := rs[0]
		if r.Op != c.op || r.Needs[0].Path != c.path || !slices.Equal(r.Needs[0].Rights, c.rights) {
			t.Errorf("held=%v: %s (first need %s %v), want %s of %s %v", c.held, r, r.Needs[0].Path, r.Needs[0].Rights, c.op, c.path, c.rights)
		}
	}
}
