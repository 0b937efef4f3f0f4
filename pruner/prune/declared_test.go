package prune

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/pruner/exercise"
)

// pongServer answers every line on a loopback TCP port with "pong" until
// the test ends, standing in for a host outside the run; it returns the
// port.
func pongServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintln(c, "pong")
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// declaredExercise is a bash-only exercise that declares localhost:<port>
// and, when connects, talks to the server there.
func declaredExercise(t *testing.T, port int, connects bool) *exercise.Exercise {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "net", "declared")
	talk := ""
	if connects {
		talk = fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d\necho ping >&3\nread -r line <&3\n[[ $line == pong ]]\n", port)
	}
	write(t, filepath.Join(dir, "build_script.sh"), "#!/bin/bash\nset -euo pipefail\n"+talk+
		"printf '<testsuite name=\"net\" tests=\"1\"><testcase classname=\"net\" name=\"talks\"/></testsuite>\\n' > test-reports/net.xml\n", 0o755)
	write(t, filepath.Join(dir, "test-reports", ".keep"), "", 0o644)
	cfg, _ := json.Marshal(map[string]any{"report_globs": []string{"test-reports/*.xml"},
		"declared_hosts": []string{fmt.Sprintf("localhost:%d", port)}})
	write(t, filepath.Join(dir, "prune.json"), string(cfg), 0o644)
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestHostDeclaredHost: a declared host's [connect] rule stays when the
// build talks to it (removing it fails the run) and is minimised away when
// it does not.
func TestHostDeclaredHost(t *testing.T) {
	needHost(t)
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	port := pongServer(t)
	rule := fmt.Sprintf("allow localhost:%d", port)
	for _, c := range []struct {
		name     string
		connects bool
	}{{"kept when the build needs it", true}, {"dropped when it does not", false}} {
		t.Run(c.name, func(t *testing.T) {
			opts := hostOptions(t)
			opts.SkipContainment, opts.SkipLimits = true, true
			opts.BaselineRuns, opts.VerificationRuns = 1, 1
			res, err := Prune(t.Context(), declaredExercise(t, port, c.connects), opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Aborted != nil {
				t.Fatalf("aborted: %s", res.Aborted.Aborted)
			}
			var rules []string
			for _, r := range res.Policy.Connect {
				rules = append(rules, r.String())
			}
			has := strings.Contains(strings.Join(rules, "\n"), rule)
			if has != c.connects {
				t.Errorf("[connect] %v, want %q there: %v\n%s", rules, rule, c.connects, res.Cfg)
			}
		})
	}
}
