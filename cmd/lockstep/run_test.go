package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

const truePolicy = "[read]\n/usr\n/etc/ld.so.cache\n[execute]\n/usr\n"

// TestRunVerb drives `lockstep run` end to end through the built binary: the
// exit statuses users meet.
func TestRunVerb(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	cfg := filepath.Join(d, "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n"+filepath.Join(d, "ok")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d, "ok"), []byte("fine\n"), 0o644)
	os.WriteFile(filepath.Join(d, "no"), []byte("secret\n"), 0o644)
	bad := filepath.Join(d, "bad.cfg")
	os.WriteFile(bad, []byte("[read]\nrelative\n[nosuch]\n"), 0o644)
	udp := filepath.Join(d, "udp.cfg")
	os.WriteFile(udp, []byte("[bind]\nallow 53 udp\n"), 0o644)
	for _, tc := range []struct {
		Name     string
		Args     []string
		Want     int
		Out, Err string
	}{
		{"allowed", []string{"run", "--config", cfg, "--", "cat", filepath.Join(d, "ok")}, 0, "fine", "lockstep: OK abi="},
		{"refused", []string{"run", "--config", cfg, "--", "cat", filepath.Join(d, "no")}, 1, "", "Permission denied"},
		{"bad policy", []string{"run", "--config", bad, "--", "true"}, cli.ExitRefused, "", "Nothing ran."},
		{"udp below abi 10", []string{"run", "--config", cfg, "--config", udp, "--", "true"}, cli.ExitRefused, "", "needs Landlock ABI 10"},
		{"hash mismatch", []string{"run", "--config", cfg, "--expect-hash", "sha256:00", "--", "true"}, cli.ExitRefused, "", "Nothing ran."},
		{"not found", []string{"run", "--config", cfg, "--", "no-such-cmd-q"}, cli.ExitNotFound, "", "not found"},
		{"no command", []string{"run", "--config", cfg}, cli.ExitUsage, "", "usage: lockstep run"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.Args...)
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.Want || !strings.Contains(out.String(), tc.Out) || !strings.Contains(errb.String(), tc.Err) {
				t.Errorf("lockstep %q = %d\nstdout %q\nstderr %q\nwant %d, stdout with %q, stderr with %q", tc.Args, code, out.String(), errb.String(), tc.Want, tc.Out, tc.Err)
			}
		})
	}
}

// TestRunInheritedDescriptors: a descriptor lockstep inherits beyond stdin,
// stdout and stderr (ExtraFiles: fd 3, as a CI runner or a shell may leave
// one) does not reach the command, on either start path (no limits: the
// direct fork; nofile: the re-executed child; --exec: lockstep itself).
func TestRunInheritedDescriptors(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	for _, tc := range []struct{ name, limits, flag string }{
		{"direct", "", "-q"}, {"reexec", "[limits]\nnofile=64\n", "-q"}, {"exec", "", "--exec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(d, tc.name+".cfg")
			if err := os.WriteFile(cfg, []byte(truePolicy+tc.limits), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd := exec.Command(bin, "run", "-q", tc.flag, "--config", cfg, "--", "sh", "-c", "true <&3 && echo inherited; echo ran")
			cmd.ExtraFiles = []*os.File{f}
			out, err := cmd.Output()
			if err != nil || strings.Contains(string(out), "inherited") || !strings.Contains(string(out), "ran") {
				t.Errorf("lockstep run with fd 3 inherited: %v, stdout %q; want fd 3 closed in the command", err, out)
			}
		})
	}
}
