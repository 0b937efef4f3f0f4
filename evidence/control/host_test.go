package control

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
)

// restrictEnv makes the test binary a restricting helper: it restricts
// itself as the env lists say, then executes its arguments.
const restrictEnv = "LOCKSTEP_CONTROL_TEST_RESTRICT"

func TestMain(m *testing.M) {
	if os.Getenv(restrictEnv) == "1" {
		restrictAndExec()
	}
	os.Exit(m.Run())
}

func list(name string) []string {
	if v := os.Getenv(name); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

func restrictAndExec() {
	var rules []landlock.Rule
	if d := list("LL_RO"); d != nil {
		rules = append(rules, landlock.RODirs(d...))
	}
	if d := list("LL_RD"); d != nil {
		rules = append(rules, landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSReadDir, d...))
	}
	if d := list("LL_RW"); d != nil {
		rules = append(rules, landlock.RWDirs(d...).WithRefer())
	}
	if d := list("LL_NOREFER"); d != nil {
		rules = append(rules, landlock.RWDirs(d...))
	}
	if d := list("LL_RWFILE"); d != nil {
		rules = append(rules, landlock.RWFiles(d...))
	}
	if err := landlock.V5.Restrict(rules...); err != nil {
		fmt.Fprintln(os.Stderr, "restrict:", err)
		os.Exit(125)
	}
	args := os.Args[1:]
	err := syscall.Exec(args[0], args, os.Environ())
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(126)
}

// TestHostEndToEnd runs a shell under a real Landlock domain on this
// kernel, under the pruner's exact strace command, and checks that strace
// parsing, attribution and the control replay agree with what the script
// was built to provoke.
func TestHostEndToEnd(t *testing.T) {
	featuretest.Require(t, featuretest.LandlockIoctlDev)
	straceBin, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
	w := t.TempDir()
	for _, d := range []string{"ro", "rd", "rw", "norefer", "secret", "ro/sub"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"ro/a": "a", "secret/s": "s", "norefer/y": "y", "ro/noexec": "echo no\n"}
	for f, s := range files {
		if err := os.WriteFile(filepath.Join(w, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(w, "rd/tool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	script := strings.NewReplacer("$W", w, "$PORT", strconv.Itoa(port)).Replace(`
cat $W/secret/s
echo x > $W/ro/new
mkdir $W/ro/d
rm -f $W/ro/a
$W/rd/tool
$W/ro/noexec
cat /proc/self/status
mv $W/norefer/y $W/rw/y
(cat $W/secret/s) &
wait
exit 0
`)
	trace := filepath.Join(w, "trace")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := strace.Command(trace, self, "/bin/sh", "-c", script)
	cmd := exec.Command(straceBin, argv[1:]...)
	cmd.Env = append(os.Environ(), restrictEnv+"=1",
		"LL_RO=/usr,/etc,/lib,/lib64,/bin,"+w+"/ro", "LL_RD="+w+"/rd", "LL_RW="+w+"/rw",
		"LL_NOREFER="+w+"/norefer", "LL_RWFILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	tr, err := strace.ParseFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range attribute.Refusals(tr.Calls, attribute.Options{}) {
		if r.Call.Name == "openat" && strings.HasPrefix(r.Paths[0], "/proc/") && !strings.HasSuffix(r.Paths[0], "/status") {
			continue // coreutils' own look at /proc/filesystems and mounts
		}
		r = WithInterpreter(r)
		v := Replay(r, Options{})
		key := r.Op + " " + strings.ReplaceAll(strings.Join(r.Paths, " "), w, "$W")
		if strings.HasPrefix(key, "read /proc/") {
			key = "read /proc/PID/status"
		}
		got[key] = v.Landlock
		t.Logf("%-60s landlock=%v %s", key, v.Landlock, v.Reason)
	}
	want := map[string]bool{
		"read $W/secret/s":        true,
		"create $W/ro $W/ro/new":  true,
		"create $W/ro":            true, // mkdir
		"delete $W/ro":            true,
		"read /proc/PID/status":   true,
		"rename $W/norefer $W/rw": true,
		"execute $W/ro/noexec":    false, // no execute bit: not Landlock's
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			t.Errorf("%s: landlock=%v (found %v), want %v", k, gv, ok, v)
		}
	}
	var tool bool
	for k, v := range got {
		if strings.HasPrefix(k, "execute $W/rd/tool /bin/sh") {
			tool = v
		}
	}
	if !tool {
		t.Errorf("no replayed execute of $W/rd/tool with its interpreter; got %v", got)
	}
}
