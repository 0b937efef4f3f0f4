package attribute

import (
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// FuzzRefusals attributes arbitrary traces. Invariants: no panic; every
// refusal has a layer and a reason; a filesystem refusal names absolute,
// clean paths with sections; a network one names ports in range with a
// transport; only calls inside the domain are attributed.
func FuzzRefusals(f *testing.F) {
	f.Add(inDomain + `7 openat(3</w/d>, "sub/f", O_RDONLY) = -1 EACCES (Permission denied)
7 chdir("/w/d") = 0
7 renameat2(AT_FDCWD</w>, "a", AT_FDCWD</w>, "/w/d/b", RENAME_EXCHANGE) = -1 EXDEV (Invalid cross-device link)
7 connect(5<socket:[1]>, {sa_family=AF_INET6, sin6_port=htons(443), inet_pton(AF_INET6, "::1", &sin6_addr)}, 28) = -1 EACCES (Permission denied)
7 bind(5<UDP:[1]>, {sa_family=AF_UNIX, sun_path="rel"}, 5) = -1 EACCES (Permission denied)
7 mknod("/w/x", S_IFIFO|0600) = -1 EACCES (Permission denied)
7 ioctl(3</dev/pts/1>, TIOCSWINSZ, {ws_row=1}) = -1 EACCES (Permission denied)
7 openat(AT_FDCWD</w>, "/proc/thread-self/x", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EACCES (Permission denied)
7 clone3({flags=CLONE_VM}, 88) = -1 EAGAIN (Resource temporarily unavailable)
`)
	f.Add(inDomain + "7 ftruncate(4</w//x/>, 0) = -1 EACCES (Permission denied)\n7 ioctl(3</dev/./pts/1>, TCGETS, 0x1) = -1 EACCES (Permission denied)\n")
	f.Add(inDomain + "7 fork() = 8\n8 execve(\"x\", [\"x\"], 0x1 /* 1 var */) = -1 EACCES (Permission denied)\n")
	lstat := fakeFS{"/w": fs.ModeDir, "/w/a": fs.ModeSymlink, "/w/d": fs.ModeDir}.Lstat
	f.Fuzz(func(t *testing.T, trace string) {
		a := New(Options{Lstat: lstat})
		p := strace.NewParser(strings.NewReader(trace))
		for c, err := range p.All() {
			if err != nil {
				continue
			}
			r := a.Observe(c)
			if r == nil {
				continue
			}
			if !c.InDomain || r.Call != c || r.Layer == "" || r.Reason == "" || r.Op == "" {
				t.Fatalf("bad refusal %+v for %s", r, c)
			}
			switch r.Layer {
			case Filesystem:
				if len(r.Needs) == 0 || len(r.Sections) == 0 {
					t.Fatalf("filesystem refusal without needs: %+v", r)
				}
				for _, n := range r.Needs {
					if !path.IsAbs(n.Path) || path.Clean(n.Path) != n.Path || len(n.Sections) == 0 || len(n.Rights) == 0 {
						t.Fatalf("bad need %+v in %s", n, c)
					}
				}
			case Network:
				if len(r.Net) == 0 {
					t.Fatalf("network refusal without rules: %+v", r)
				}
				for _, n := range r.Net {
					if n.Port < 0 || n.Port > 65535 || (n.Transport != policy.TCP && n.Transport != policy.UDP) ||
						(n.Section != policy.Bind && n.Section != policy.Connect) {
						t.Fatalf("bad network need %+v in %s", n, c)
					}
				}
			case Limit:
				if r.Limit == "" {
					t.Fatalf("limit refusal without a limit: %+v", r)
				}
			}
			_ = r.String()
		}
	})
}
