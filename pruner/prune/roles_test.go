package prune

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
)

// servedRole runs this test binary (whose TestMain calls ServeRoles) as
// `<binary> args…` and returns its exit status and stderr.
func servedRole(t *testing.T, args ...string) (int, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const truePolicy = "[read]\n/usr\n/etc/ld.so.cache\n[execute]\n/usr\n"

// TestEnforcerRole runs the program as its own enforcer: it applies the
// policy as `lockstep run` does, and stops with the lines and statuses
// verdict.Stopped tells from the command's own.
func TestEnforcerRole(t *testing.T) {
	featuretest.Require(t, featuretest.Landlock)
	good := writeFile(t, "true.cfg", truePolicy)
	code, stderr := servedRole(t, EnforcerVerb, "--config", good, "--", "/usr/bin/true")
	if code != 0 || !strings.HasPrefix(stderr, "lockstep: OK ") {
		t.Errorf("under a policy granting /usr: status %d, stderr %q; want 0 and the status line", code, stderr)
	}
	if code, stderr := servedRole(t, EnforcerVerb, "-q", "--config", good, "--", "/usr/bin/true"); code != 0 || stderr != "" {
		t.Errorf("with -q: status %d, stderr %q; want 0 and nothing", code, stderr)
	}
	if code, _ := servedRole(t, EnforcerVerb, "--config", good, "--", "/usr/bin/false"); code != 1 {
		t.Errorf("the command's own status: %d, want false's 1", code)
	}
	for _, c := range []struct {
		name   string
		args   []string
		status int
	}{
		{"bad policy", []string{"--config", writeFile(t, "bad.cfg", "[nonsense]\n/usr\n"), "--", "/usr/bin/true"}, verdict.RefusedStatus},
		{"missing policy", []string{"--config", filepath.Join(t.TempDir(), "none.cfg"), "--", "/usr/bin/true"}, verdict.RefusedStatus},
		{"no policy", []string{"--", "/usr/bin/true"}, verdict.UsageStatus},
		{"no command", []string{"--config", good, "--"}, verdict.UsageStatus},
		{"unknown flag", []string{"--base-dir", "/", "--", "/usr/bin/true"}, verdict.UsageStatus},
	} {
		code, stderr := servedRole(t, append([]string{EnforcerVerb}, c.args...)...)
		if code != c.status || verdict.Stopped(code, []byte(stderr)) == "" {
			t.Errorf("%s: status %d, stderr %q; want %d and a line verdict.Stopped reads as the enforcer's", c.name, code, stderr, c.status)
		}
	}
}

// TestEnforcerRoleSignal: SIGTERM to the enforcer (the exercise runner's
// at a timeout) ends the command too, and the enforcer exits 128+15 saying
// so, as `lockstep run` does; uncaught, the enforcer died alone.
func TestEnforcerRoleSignal(t *testing.T) {
	featuretest.Require(t, featuretest.Landlock)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, EnforcerVerb, "--config", writeFile(t, "sleep.cfg", truePolicy), "--", "/usr/bin/sleep", "60")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The status line comes right before the command starts.
	line := make([]byte, 512)
	n, _ := stderr.Read(line)
	if !bytes.HasPrefix(line[:n], []byte("lockstep: OK ")) {
		t.Fatalf("first stderr %q, want the status line", line[:n])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := readAll(stderr)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) || !strings.Contains(rest, "lockstep run: ") {
		t.Errorf("after SIGTERM: status %d, stderr %q; want 143 and the enforcer's line", code, rest)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the enforcer took %v to end after SIGTERM; the command was not ended with it", d)
	}
}

func readAll(r interface{ Read([]byte) (int, error) }) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.String(), err
}

// TestDefaultEnforcerNeedsRoles: with Options.Enforcer nil, Prune uses this
// program as the enforcer only when it serves the roles; otherwise the
// re-executed program would run its main again and prune without end.
func TestDefaultEnforcerNeedsRoles(t *testing.T) {
	featuretest.Require(t, featuretest.Landlock)
	ex := readExercise(t, "generic/shell-reference")
	opts := Options{WorkDir: filepath.Join(t.TempDir(), "testing-dir"), ScratchDir: t.TempDir()}
	servesRoles.Store(false)
	t.Cleanup(func() { servesRoles.Store(true) })
	if _, err := newState(ex, opts); !errors.Is(err, errNoRoles) {
		t.Errorf("default enforcer without ServeRoles: %v, want errNoRoles", err)
	}
	servesRoles.Store(true)
	s, err := newState(ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	self, _ := os.Executable()
	if len(s.enforcer) != 2 || s.enforcer[0] != self || s.enforcer[1] != EnforcerVerb {
		t.Errorf("default enforcer %q, want {%s, %s}", s.enforcer, self, EnforcerVerb)
	}
}
