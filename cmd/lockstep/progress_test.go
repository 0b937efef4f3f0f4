package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// TestPruneProgress prunes the generic reference exercise on this host
// (LOCKSTEP_DISPOSABLE=1, its own working directory, no containment
// checks, which would plant canaries in /): stderr, not a terminal, has a
// progress line for every stage and for every run the result counts.
func TestPruneProgress(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
	bin, err := filesBin()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../../testdata/exercises")
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "prune", "--on-host", "--key", "generic", "--exercises", root, "--out", out,
		"--skip-containment", "--work-dir", filepath.Join(t.TempDir(), "testing-dir"))
	cmd.Env = append(os.Environ(), "LOCKSTEP_DISPOSABLE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockstep prune: %v\n%s", err, stderr.String())
	}
	t.Logf("prune: %v", time.Since(start).Round(time.Second))
	text := stderr.String()
	for _, stage := range []string{"generic_shell-reference: exercise 1 of 1", "baseline: 3 runs agree", "(filesystem, ", "(minimisation, ",
		"(limits measurement, ", "(limits verification, ", "(verification, JOINT)"} {
		if !regexp.MustCompile(`(?m)^lockstep prune \[[0-9hms.]+\] .*` + regexp.QuoteMeta(stage)).MatchString(text) {
			t.Errorf("stderr has no progress line for %q:\n%s", stage, text)
		}
	}
	m := regexp.MustCompile(`in (\d+) runs`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no result line:\n%s", text)
	}
	var total int
	fmt.Sscan(m[1], &total)
	// The three baseline runs share one line; every other run has its own.
	for n := 1; n <= total-3; n++ {
		if !strings.Contains(text, fmt.Sprintf("] run %d (", n)) {
			t.Errorf("no progress line for run %d of %d:\n%s", n, total-3, text)
		}
	}
}

// TestPruneQuiet: -q leaves no progress line, only the result; without it
// the exercise's line comes first. The broken exercise aborts at its
// baseline, so this is quick.
func TestPruneQuiet(t *testing.T) {
	root, _ := filepath.Abs("../../testdata/exercises")
	t.Setenv("LOCKSTEP_DISPOSABLE", "1")
	t.Setenv("LOCKSTEP_GUEST", "")
	for _, quiet := range []bool{false, true} {
		args := []string{"prune", "--on-host", "--key", "broken", "--exercises", root, "--out", t.TempDir(),
			"--skip-containment", "--work-dir", filepath.Join(t.TempDir(), "testing-dir")}
		if quiet {
			args = append(args, "-q")
		}
		code, _, stderr := runCLI(t, args...)
		progress := strings.Contains(stderr, cli.ProgressPrefix("prune"))
		if code != cli.ExitFail || !strings.Contains(stderr, "lockstep prune: broken_failing-test: aborted") || progress == quiet {
			t.Errorf("prune -q=%v: status %d, stderr\n%s\nwant 1, the abort, and progress lines only without -q", quiet, code, stderr)
		}
	}
}

// TestPruneProgressOnTerminal: with stderr a real terminal, progress lines
// rewrite one line and the abort stays.
func TestPruneProgressOnTerminal(t *testing.T) {
	bin, err := filesBin()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../../testdata/exercises")
	master, slave := openPTY(t)
	shown := drain(master)
	cmd := exec.Command(bin, "prune", "--on-host", "--key", "broken", "--exercises", root, "--out", t.TempDir(),
		"--skip-containment", "--work-dir", filepath.Join(t.TempDir(), "testing-dir"))
	cmd.Env = append(os.Environ(), "LOCKSTEP_DISPOSABLE=1")
	cmd.Stderr = slave
	if err := cmd.Run(); err == nil {
		t.Fatal("the broken exercise's prune succeeded")
	}
	// The progress line says "aborted" too, before the abort's own line:
	// what is awaited is the abort's line, which the process wrote last.
	abort := cli.EraseLine + "lockstep prune: broken_failing-test: aborted"
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(shown(), abort) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := shown()
	if !strings.Contains(got, cli.ProgressPrefix("prune")) || !strings.Contains(got, abort) {
		t.Errorf("the terminal showed %q; want a progress line erased by the abort", got)
	}
}

// TestVerifyProgressByDefault: verify reports each guest and stage on a
// stderr that is not a terminal too (it used to only on a terminal or with
// -v), in the progress form; -q leaves none.
func TestVerifyProgressByDefault(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		a := &verifyArgs{}
		fs := flag.NewFlagSet("verify", flag.ContinueOnError)
		a.declare(fs)
		if err := fs.Parse([]string{"-q=" + strconv.FormatBool(quiet)}); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		opts := a.options(&cli.Stdio{Err: &b}, nil, nil)
		if quiet {
			if opts.Progress != nil {
				t.Error("verify -q reports progress")
			}
			continue
		}
		if opts.Progress == nil {
			t.Fatal("verify reports no progress where stderr is not a terminal")
		}
		opts.Progress("booting %s", "7.2.13")
		if !regexp.MustCompile(`^lockstep verify \[0s\] booting 7\.2\.13\n$`).MatchString(b.String()) {
			t.Errorf("progress line %q", b.String())
		}
	}
}

// progressCase is a command line of a verb that shows progress, run with
// and without -q by testProgressByDefault.
type progressCase struct {
	name, verb string
	args       []string
	sub        bool // args[1] is a sub-verb: -q goes after it
	// bin runs the built binary instead of in-process: a verb that
	// re-executes itself (lockstep run) must not re-execute the test.
	bin bool
}

// run runs args as c says: status, stdout, stderr.
func (c progressCase) run(t *testing.T, args []string) (int, string, string) {
	t.Helper()
	if !c.bin {
		return runCLI(t, args...)
	}
	bin, err := filesBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	return exitCode(cmd.Run()), out.String(), stderr.String()
}

// testProgressByDefault runs each case, stderr not a terminal,
// once as given and once with -q: the first has at least one progress line,
// the second none, and both exit alike with the same stdout.
func testProgressByDefault(t *testing.T, cases []progressCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := c.run(t, c.args)
			n := 1
			if c.sub {
				n = 2
			}
			quietArgs := append(append(slices.Clone(c.args[:n]), "-q"), c.args[n:]...)
			qcode, qout, qstderr := c.run(t, quietArgs)
			progress := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cli.ProgressPrefix(c.verb)) + `[0-9hms.]+\] `)
			if !progress.MatchString(stderr) {
				t.Errorf("lockstep %q: stderr has no progress line:\n%s", c.args, stderr)
			}
			if progress.MatchString(qstderr) {
				t.Errorf("lockstep %q: stderr has progress lines:\n%s", quietArgs, qstderr)
			}
			if code != qcode || out != qout {
				t.Errorf("-q changed the result: status %d, stdout %q; with -q %d, %q", code, out, qcode, qout)
			}
		})
	}
}

// TestReproProgress: repro of a command on this machine's kernel twice (no
// guest) reports each side as it starts and ends.
func TestReproProgress(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
	testProgressByDefault(t, []progressCase{{name: "host", verb: "repro", bin: true,
		args: []string{"repro", "--kernel", "host", "--kernel", "host", "--wait", "2s", "--config", "../../repro/testdata/udp.cfg", "--", "true"}}})
}

// noQEMU leaves PATH without QEMU, so a guest-booting verb stops where it
// would start QEMU, after its first progress lines: a cheap run to its
// progress, without a guest.
func noQEMU(t *testing.T) string {
	t.Helper()
	bz, err := kernel.Path(t.Context(), kernel.DefaultPin, nil)
	if err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LOCKSTEP_QEMU", "")
	return bz
}

// TestSelftestProgress: selftest says which kernel it boots before the
// guest's boot stages.
func TestSelftestProgress(t *testing.T) {
	bz := noQEMU(t)
	testProgressByDefault(t, []progressCase{{name: "no-qemu", verb: "selftest", args: []string{"selftest", "--kernel", bz}}})
}

// TestRecordProgress: record run and check say what the guest they boot is
// for before its boot stages.
func TestRecordProgress(t *testing.T) {
	bz := noQEMU(t)
	script := filepath.Join(t.TempDir(), "s.script")
	if err := os.WriteFile(script, []byte("sleep 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	testProgressByDefault(t, []progressCase{
		{name: "run", verb: "record", sub: true, args: []string{"record", "run", "--dir", dir, "--name", "r", "--kernel", bz, "--script", script, "--", "true"}},
		{name: "check", verb: "record", sub: true, args: []string{"record", "check", "--dir", dir, "--name", "r", "--kernel", bz, "--script", script,
			"--policy", "../../repro/testdata/udp.cfg", "--", "true"}},
	})
}

// TestImageBuildProgress: image build reports its stages; without
// debootstrap on PATH it stops after the first, the cache's check.
func TestImageBuildProgress(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	testProgressByDefault(t, []progressCase{{name: "no-debootstrap", verb: "image", sub: true, args: []string{"image", "build", "generic"}}})
}

// TestImageBuildProgressOnTerminal: with stderr a real terminal, image
// build's progress line is erased by the error that ends the build.
func TestImageBuildProgressOnTerminal(t *testing.T) {
	bin, err := filesBin()
	if err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	shown := drain(master)
	cmd := exec.Command(bin, "image", "build", "generic")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir(), "PATH="+t.TempDir())
	cmd.Stderr = slave
	if err := cmd.Run(); exitCode(err) != cli.ExitFail {
		t.Fatalf("image build without debootstrap: %v, want status 1 (no debootstrap, or not root)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(shown(), "lockstep image: ") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := shown()
	if !strings.Contains(got, cli.ProgressPrefix("image")) || !strings.Contains(got, cli.EraseLine+"lockstep image: ") {
		t.Errorf("the terminal showed %q; want a progress line erased by the error", got)
	}
}
