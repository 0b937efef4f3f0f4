package control

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

func fsRefusal(op string, needs ...attribute.Need) *attribute.Refusal {
	r := &attribute.Refusal{Layer: attribute.Filesystem, Op: op, Call: &strace.Call{PID: 4242, TGID: 4242}}
	r.Add(needs...)
	return r
}

func need(p string, rights []attribute.Right, secs ...policy.Section) attribute.Need {
	return attribute.Need{Path: p, Sections: secs, Rights: rights}
}

func TestReplayFS(t *testing.T) {
	d := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(d, "x"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Mkdir(filepath.Join(d, "sub"), 0o755))
	must(os.Symlink("f", filepath.Join(d, "link")))
	rf := []attribute.Right{landlock.ReadFile}
	for _, tc := range []struct {
		Name string
		R    *attribute.Refusal
		Want bool
	}{
		{"read a file", fsRefusal("read", need(d+"/f", rf, policy.Read)), true},
		{"read through a symlink", fsRefusal("read", need(d+"/link", rf, policy.Read)), true},
		{"read a directory", fsRefusal("read", need(d+"/sub", []attribute.Right{landlock.ReadDir}, policy.Read)), true},
		{"read a missing file", fsRefusal("read", need(d+"/gone", rf, policy.Read)), false},
		{"write a file", fsRefusal("write", need(d+"/f", []attribute.Right{landlock.WriteFile}, policy.Write)), true},
		{"execute without an x bit", fsRefusal("execute", need(d+"/f", nil, policy.Execute, policy.Read)), false},
		{"execute a script", fsRefusal("execute", need(d+"/x", nil, policy.Execute, policy.Read)), true},
		{"execute a directory", fsRefusal("execute", need(d+"/sub", nil, policy.Execute)), false},
		{"create a new file and write it", fsRefusal("create",
			need(d+"/sub", []attribute.Right{landlock.MakeReg}, policy.Create),
			need(d+"/sub/new", []attribute.Right{landlock.WriteFile}, policy.Write)), true},
		{"create in a directory yet to be made", fsRefusal("create", need(d+"/sub/a/b", []attribute.Right{landlock.MakeDir}, policy.Create)), true},
		{"delete", fsRefusal("delete", need(d+"/sub", []attribute.Right{landlock.RemoveFile}, policy.Delete)), true},
		{"own /proc entry", fsRefusal("read", need("/proc/4242/status", rf, policy.Read)), true},
		{"own thread's /proc entry", fsRefusal("read", need("/proc/4242/task/4243/stat", rf, policy.Read)), true},
		{"refer within one device", fsRefusal("rename",
			need(d+"/sub", []attribute.Right{landlock.Refer}, policy.Restructure),
			need(d, []attribute.Right{landlock.Refer}, policy.Restructure)), true},
		{"refer across devices is not Landlock's", fsRefusal("rename",
			need(d+"/sub", []attribute.Right{landlock.Refer}, policy.Restructure),
			need("/proc/self", []attribute.Right{landlock.Refer}, policy.Restructure)), false},
		{"ioctl without a pseudo-terminal exercise", func() *attribute.Refusal {
			r := fsRefusal("ioctl", need("/dev/pts/0", []attribute.Right{landlock.IoctlDev}, policy.Ioctl))
			r.Detail = "TCGETS"
			return r
		}(), false},
		{"never a fixed refusal", &attribute.Refusal{Layer: attribute.Fixed, Op: "setsid"}, false},
		{"never an empty one", &attribute.Refusal{Layer: attribute.Filesystem}, false},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			v := Replay(tc.R, Options{})
			if v.Landlock != tc.Want {
				t.Errorf("Replay(%v).Landlock = %v, want %v; reason %q, checks %+v", tc.R, v.Landlock, tc.Want, v.Reason, v.Checks)
			}
			if !v.Landlock && v.Reason == "" {
				t.Error("no reason for a refusal that is not Landlock's")
			}
		})
	}
	entries, err := os.ReadDir(filepath.Join(d, "sub"))
	must(err)
	if len(entries) != 0 {
		t.Errorf("the create replay left %v behind", entries)
	}
}

func TestReplayPty(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skipf("no /dev/ptmx here: %v", err)
	}
	for _, req := range []string{"TIOCGPTN", "TIOCSPTLCK", "TCGETS", "TCSETS", "TCSETSW", "TCSETSF", "TIOCGWINSZ", "TIOCSWINSZ"} {
		r := fsRefusal("ioctl", need("/dev/pts/999", []attribute.Right{landlock.IoctlDev}, policy.Ioctl))
		r.Detail = req
		if v := Replay(r, Options{PseudoTerminals: true}); !v.Landlock {
			t.Errorf("%s: %s", req, v.Reason)
		}
	}
	r := fsRefusal("ioctl", need("/dev/pts/999", []attribute.Right{landlock.IoctlDev}, policy.Ioctl))
	r.Detail = "TIOCSCTTY"
	if v := Replay(r, Options{PseudoTerminals: true}); v.Landlock {
		t.Error("TIOCSCTTY replayed as Landlock's")
	}
}

func TestReplayNet(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	for _, n := range []attribute.NetNeed{
		{Section: policy.Bind, Port: 0, Transport: policy.TCP},
		{Section: policy.Bind, Port: port, Transport: policy.TCP}, // in use: EADDRINUSE is not EACCES
		{Section: policy.Bind, Port: port, Transport: policy.UDP},
		{Section: policy.Connect, Addr: mustAddr("127.0.0.1"), Port: port, Transport: policy.TCP},
	} {
		r := &attribute.Refusal{Layer: attribute.Network, Net: []attribute.NetNeed{n}}
		if v := Replay(r, Options{}); !v.Landlock {
			t.Errorf("%+v: %s", n, v.Reason)
		}
	}
	r := &attribute.Refusal{Layer: attribute.Network, Net: []attribute.NetNeed{{Section: policy.Connect, Port: 80}}}
	if v := Replay(r, Options{}); v.Landlock {
		t.Error("a connect without an address replayed as Landlock's")
	}
}

func TestInterpreter(t *testing.T) {
	d := t.TempDir()
	script := filepath.Join(d, "s")
	if err := os.WriteFile(script, []byte("#!  /bin/sh -e\necho\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Interpreter(script); err != nil || got != "/bin/sh" {
		t.Errorf("Interpreter(script) = %q, %v, want /bin/sh", got, err)
	}
	got, err := Interpreter("/bin/sh")
	if err != nil || !strings.HasPrefix(got, "/lib") || !strings.Contains(got, "ld-") {
		t.Errorf("Interpreter(/bin/sh) = %q, %v, want the dynamic loader", got, err)
	}
	r := WithInterpreter(fsRefusal("execute", need(script, nil, policy.Execute, policy.Read)))
	if len(r.Paths) != 3 || r.Paths[1] != "/bin/sh" || r.Paths[2] != got {
		t.Errorf("WithInterpreter paths = %q, want the script, /bin/sh and %s", r.Paths, got)
	}
	if _, err := Interpreter(filepath.Join(d, "none")); err == nil {
		t.Error("Interpreter of a missing file: no error")
	}
}

func TestMapPath(t *testing.T) {
	for _, tc := range []struct{ In, Want string }{
		{"/proc/77/status", "/proc/self/status"},
		{"/proc/77", "/proc/self"},
		{"/proc/77/task/78/attr/current", "/proc/thread-self/attr/current"},
		{"/proc/77/fd/3", "/proc/self/fd"},
		{"/proc/770/status", "/proc/770/status"},
		{"/proc/1/status", "/proc/1/status"},
	} {
		if got := mapPath(tc.In, 77, false); got != tc.Want {
			t.Errorf("mapPath(%q) = %q, want %q", tc.In, got, tc.Want)
		}
	}
}

func TestWithInterpreterSkipsTheUnrunnable(t *testing.T) {
	d := t.TempDir()
	script := filepath.Join(d, "s")
	if err := os.WriteFile(script, []byte("#!"+d+"/missing\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := WithInterpreter(fsRefusal("execute", need(script, nil, policy.Execute, policy.Read)))
	if len(r.Paths) != 1 {
		t.Errorf("WithInterpreter paths = %q, want the script alone", r.Paths)
	}
}
