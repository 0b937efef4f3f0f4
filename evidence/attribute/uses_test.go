package attribute

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Uses charges each successful call (an ioctl on a regular file, or one
// every file answers, needs nothing) with what it would need under
// Landlock: a created file its parent's make_reg, a read file read_file, a
// UDP bind its port; failed calls, O_PATH opens and ungoverned calls give
// nothing.
func TestUses(t *testing.T) {
	trace := `100 openat(AT_FDCWD</w>, "in.txt", O_RDONLY|O_CLOEXEC) = 3</w/in.txt>
100 read(3</w/in.txt>, "x", 1) = 1
100 ioctl(3</w/in.txt>, FIOCLEX) = 0
100 ioctl(3</w/in.txt>, TCGETS, 0x7ffd) = -1 ENOTTY (Inappropriate ioctl for device)
100 ioctl(8</dev/pts/3>, FIONBIO, [1]) = 0
100 openat(AT_FDCWD</w>, "out.txt", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4</w/out.txt>
100 openat(AT_FDCWD</w>, "/etc", O_RDONLY|O_PATH) = 5</etc>
100 openat(AT_FDCWD</w>, "missing", O_RDONLY) = -1 ENOENT (No such file or directory)
100 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC, IPPROTO_IP) = 6<UDP:[77]>
100 bind(6<UDP:[77]>, {sa_family=AF_INET, sin_port=htons(5000), sin_addr=inet_addr("127.0.0.1")}, 16) = 0
100 socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK, IPPROTO_TCP) = 7<TCP:[78]>
100 connect(7<TCP:[78]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("192.0.2.7")}, 16) = -1 EINPROGRESS (Operation now in progress)
100 connect(7<TCP:[78]>, {sa_family=AF_INET, sin_port=htons(444), sin_addr=inet_addr("192.0.2.7")}, 16) = -1 ECONNREFUSED (Connection refused)
`
	var calls []*strace.Call
	if _, err := strace.Parse(strings.NewReader(trace), func(c *strace.Call) error { calls = append(calls, c); return nil }); err != nil {
		t.Fatal(err)
	}
	lstat := fakeFS{"/w": fs.ModeDir, "/w/in.txt": 0}.Lstat
	var got []string
	for _, r := range Uses(calls, Options{Lstat: lstat}) {
		got = append(got, r.String())
	}
	want := []string{
		"filesystem read  /w/in.txt[read] (line 1, pid 100)",
		"filesystem create  /w[create] /w/out.txt[write] (line 6, pid 100)",
		"network bind  [bind] 127.0.0.1:5000 udp (line 10, pid 100)",
		// A non-blocking connect Landlock let through ends in EINPROGRESS.
		"network connect  [connect] 192.0.2.7:443 tcp (line 12, pid 100)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Uses =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, r := range Uses(calls, Options{Lstat: lstat}) {
		if r.Op == "create" && r.Needs[0].Rights[0] != landlock.MakeReg {
			t.Errorf("create needs %v first, want make_reg on the parent", r.Needs[0].Rights)
		}
	}
}
