package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLineDisplay: on a terminal, a progress line replaces the one before
// it (cut to the width), any other line stays, and writes may split lines
// anywhere.
func TestLineDisplay(t *testing.T) {
	var b bytes.Buffer
	d := &lineDisplay{w: &b, progress: progressPrefix("prune"), width: 30}
	for _, chunk := range []string{
		"lockstep prune [0s] run 1\nlockstep pr", "une [1s] run 2 with a very long tail that is cut\n",
		"lockstep prune: warning: kept\n", "lockstep prune [2s] run 3\n", "partial",
	} {
		if _, err := d.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	d.end()
	want := "lockstep prune [0s] run 1" + eraseLine + "lockstep prune [1s] run 2 wit" + eraseLine +
		"lockstep prune: warning: kept\n" + "lockstep prune [2s] run 3" + eraseLine + "partial\n"
	if b.String() != want {
		t.Errorf("display wrote\n%q\nwant\n%q", b.String(), want)
	}
}

// TestLineDisplayConcurrent: a guest's stream and the verb's logger write
// at once; every line arrives whole.
func TestLineDisplayConcurrent(t *testing.T) {
	var b bytes.Buffer
	d := &lineDisplay{w: &b, progress: progressPrefix("prune"), width: 200}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				fmt.Fprintf(d, "kept %d-%d\n", g, i)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 400 || !regexp.MustCompile(`^(kept \d-\d+\n)+$`).MatchString(b.String()) {
		t.Errorf("%d lines, or a line torn:\n%s", n, b.String())
	}
}

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
		progress := strings.Contains(stderr, progressPrefix("prune"))
		if code != exitFail || !strings.Contains(stderr, "lockstep prune: broken_failing-test: aborted") || progress == quiet {
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
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(shown(), "aborted") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := shown()
	if !strings.Contains(got, progressPrefix("prune")) || !strings.Contains(got, eraseLine+"lockstep prune: broken_failing-test: aborted") {
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
		opts := a.options(&stdio{err: &b}, nil, nil)
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
