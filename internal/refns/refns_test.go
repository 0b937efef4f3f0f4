package refns

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/proctest"
)

// TestMain serves the role (Verb) from this test binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Verb {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// TestCloneIsolates: a command started through CloneCommand by a process
// that executes it in place (as cold-run does; here the test itself)
// cannot write a read-only path, see or signal the process that started it,
// nor leave a setsid daemon behind; its status comes back.
func TestCloneIsolates(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an isolated run maps every id into its user namespace: that takes root")
	}
	guard := t.TempDir()
	file := filepath.Join(guard, "file")
	if err := os.WriteFile(file, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	token := strconv.Itoa(200000 + os.Getpid()%100000)
	script := strings.NewReplacer("FILE", file, "PARENT", strconv.Itoa(os.Getpid()), "TOKEN", token).Replace(`
echo tamper >FILE && echo "HOLE: wrote FILE"
kill -0 PARENT && echo "HOLE: can signal its starter (pid PARENT)"
setsid sleep TOKEN </dev/null >/dev/null 2>&1 &
sleep 0.5
exit 7`)
	argv := append(CloneCommand(self, []string{guard}, nil), "/bin/bash", "-c", script)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("the isolated command's status: %v; want exit status 7\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "HOLE") {
			t.Errorf("%s", l)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "kept\n" {
		t.Errorf("%s = %q, %v after the run; want it unchanged", file, b, err)
	}
	if pids := proctest.KillSleeping(t, token); len(pids) > 0 {
		t.Errorf("the run's setsid daemon (sleep %s) outlived the run: pids %v", token, pids)
	}
}
