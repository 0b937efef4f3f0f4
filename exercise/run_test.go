package exercise

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
)

func reference(t *testing.T, key string) *Exercise {
	t.Helper()
	found, err := ForKey(referenceRoot, key)
	if err != nil || len(found) != 1 {
		t.Fatalf("ForKey(%s) = %v, %v; want one exercise", key, found, err)
	}
	e, err := Read(found[0])
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRunReferenceExercises runs every reference exercise three times,
// unsandboxed, on this host: each run must be a usable reference and agree
// with the first (the exercises are stable).
func TestRunReferenceExercises(t *testing.T) {
	for _, key := range []string{"generic", "python", "c", "c-gcc", "fixture"} {
		t.Run(key, func(t *testing.T) { runReference(t, key) })
	}
}

// TestRunToolchainExercises runs the reference exercises whose toolchains
// are not in make deps as TestRunReferenceExercises runs the others; each
// skips, naming its README's apt-get command, where a tool (a command, or
// an absolute path a package installs) is missing.
func TestRunToolchainExercises(t *testing.T) {
	for _, c := range []struct {
		key, dir string
		tools    []string
	}{
		{"java-maven", "java-maven/maven-reference", []string{"mvn", "javac", "/root/.m2/repository/org/junit/jupiter"}},
		{"cpp", "cpp/cmake-reference", []string{"cmake", "g++", "/usr/include/catch2/catch.hpp"}},
		{"r", "r/testthat-reference", []string{"Rscript", "/usr/lib/R/site-library/testthat", "/usr/lib/R/site-library/xml2", "/usr/lib/R/site-library/remotes"}},
	} {
		t.Run(c.key, func(t *testing.T) {
			for _, tool := range c.tools {
				_, err := exec.LookPath(tool)
				if strings.HasPrefix(tool, "/") {
					_, err = os.Stat(tool)
				}
				if err != nil {
					t.Skipf("%s is not installed; see testdata/exercises/%s/README.md for the apt-get command", tool, c.dir)
				}
			}
			runReference(t, c.key)
		})
	}
}

// runReference runs the reference exercise of key three times, unsandboxed.
func runReference(t *testing.T, key string) {
	e := reference(t, key)
	work := filepath.Join(t.TempDir(), "testing-dir")
	var first verdict.Verdict
	for i := range 3 {
		res, err := e.Run(t.Context(), RunOptions{WorkDir: work, Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if err := res.Verdict.ReferenceProblem(); err != nil {
			t.Fatalf("run %d of %s: %v\nstatus %d\n%s", i, e.Stem(), err, res.Status, res.Log)
		}
		if !res.Started || res.Status != 0 || len(res.Reports) == 0 || res.Duration <= 0 {
			t.Errorf("run %d of %s: started %v, status %d, %d reports, %v; want started, 0, some, > 0",
				i, e.Stem(), res.Started, res.Status, len(res.Reports), res.Duration)
		}
		if i == 0 {
			first = res.Verdict
			t.Logf("%s: %d tests in %v", e.Stem(), len(first.Tests), res.Duration)
		} else if !res.Verdict.Same(first) {
			t.Errorf("run %d of %s = %+v, want the same as run 0 %+v", i, e.Stem(), res.Verdict, first)
		}
	}
}

// TestRunBrokenExercise checks the exercise broken on purpose: stable, and
// refused as a reference because it fails its own tests.
func TestRunBrokenExercise(t *testing.T) {
	e := reference(t, "broken")
	work := filepath.Join(t.TempDir(), "testing-dir")
	var first verdict.Verdict
	for i := range 3 {
		res, err := e.Run(t.Context(), RunOptions{WorkDir: work})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Verdict.ReferenceProblem(); !errors.Is(err, verdict.ErrFailsOwnTests) {
			t.Fatalf("run %d of broken: ReferenceProblem() = %v, want %v", i, err, verdict.ErrFailsOwnTests)
		}
		if i == 0 {
			first = res.Verdict
		} else if !res.Verdict.Same(first) {
			t.Errorf("run %d of broken = %+v, want the same as run 0 %+v", i, res.Verdict, first)
		}
	}
}

// TestRunUnderStrace wraps the build script in strace, as the pruner does:
// the verdict is the same as without, and the trace shows the build script
// started the contract's way.
func TestRunUnderStrace(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (scripts/deps.sh installs it)")
	}
	e := reference(t, "generic")
	dir := t.TempDir()
	work := filepath.Join(dir, "testing-dir")
	trace := filepath.Join(dir, "run.trace")
	plain, err := e.Run(t.Context(), RunOptions{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(t.Context(), RunOptions{WorkDir: work,
		Prefix: []string{strace, "-f", "-qq", "-y", "-s", "256", "-e", "trace=%file,%process", "-o", trace, "--"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || !res.Verdict.Same(plain.Verdict) {
		t.Fatalf("under strace: started %v, verdict %+v; want started and %+v\n%s", res.Started, res.Verdict, plain.Verdict, res.Log)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`execve("/bin/bash", ["/bin/bash", "./build_script.sh"]`, `"build/wordfreq"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("trace lacks %s", want)
		}
	}
	if res.Command[0] != strace || res.Command[len(res.Command)-1] != "build_script.sh" {
		t.Errorf("Command = %q, want strace … build_script.sh", res.Command)
	}
}

// TestRunPrefixStops checks that a prefix refusing to start the command is
// told apart from a command that ran: no sentinel, its own words before it.
func TestRunPrefixStops(t *testing.T) {
	e := reference(t, "generic")
	res, err := e.Run(t.Context(), RunOptions{WorkDir: filepath.Join(t.TempDir(), "w"),
		Prefix: []string{"/bin/sh", "-c", `echo "lockstep run: policy refused" >&2; exit 125`, "sh"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Started || res.Status != 125 || !bytes.Contains(res.BeforeStart(), []byte("lockstep run: policy refused")) {
		t.Errorf("stopped prefix: started %v, status %d, before start %q; want false, 125, the refusal",
			res.Started, res.Status, res.BeforeStart())
	}
	if res.Verdict.TestsRan {
		t.Errorf("stopped prefix: tests_ran = true")
	}
	// The command's own output after the sentinel is not "before start".
	ok, err := e.Run(t.Context(), RunOptions{WorkDir: filepath.Join(t.TempDir(), "w")})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ok.BeforeStart(), []byte("PASSED")) || !bytes.Contains(ok.Log, []byte("PASSED")) {
		t.Errorf("BeforeStart() of a started run holds the command's output: %q", ok.BeforeStart())
	}
}

// scratch writes a one-off exercise with the given build script.
func scratch(t *testing.T, script string) *Exercise {
	t.Helper()
	root := tree(t, map[string]string{"k/x/build_script.sh": "#!/bin/bash\n" + script})
	e, err := ReadDir(filepath.Join(root, "k", "x"))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestRunTimeout(t *testing.T) {
	e := scratch(t, "echo started; sleep 60\n")
	start := time.Now()
	res, err := e.Run(t.Context(), RunOptions{WorkDir: filepath.Join(t.TempDir(), "w"), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a 1 s timeout took %v", took)
	}
	if !res.TimedOut || res.Status != verdict.TimeoutStatus || res.Verdict.ExitClass != verdict.Timeout {
		t.Errorf("timed out run: %v, status %d, class %s; want true, %d, %s",
			res.TimedOut, res.Status, res.Verdict.ExitClass, verdict.TimeoutStatus, verdict.Timeout)
	}
}

func TestRunCancelled(t *testing.T) {
	e := scratch(t, "sleep 60\n")
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := e.Run(ctx, RunOptions{WorkDir: filepath.Join(t.TempDir(), "w")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled run = %v, want %v", err, context.DeadlineExceeded)
	}
}

// TestRunKillsLeftovers: a background process the build script leaves
// behind (holding the output open) is killed, and Run does not wait for it.
func TestRunKillsLeftovers(t *testing.T) {
	e := scratch(t, "sleep 300 & echo $! >leftover.pid\necho done\n")
	work := filepath.Join(t.TempDir(), "w")
	start := time.Now()
	res, err := e.Run(t.Context(), RunOptions{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Run waited %v for a leftover", took)
	}
	if res.Status != 0 || !strings.Contains(string(res.Stdout), "done") {
		t.Errorf("status %d, stdout %q; want 0, done", res.Status, res.Stdout)
	}
	b, err := os.ReadFile(filepath.Join(work, "leftover.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break // gone
		}
		// "pid (comm) S …": a zombie waits only for its reaper.
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leftover sleep %d still runs: %s", pid, stat)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunOutputCapAndStreams(t *testing.T) {
	e := scratch(t, "printf 'out%.0s' {1..1000}; printf 'err' >&2\n")
	res, err := e.Run(t.Context(), RunOptions{WorkDir: filepath.Join(t.TempDir(), "w"), MaxOutput: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != MinOutput || res.Dropped != 3000-MinOutput {
		t.Errorf("capped stdout %d bytes, dropped %d; want %d, %d", len(res.Stdout), res.Dropped, MinOutput, 3000-MinOutput)
	}
	if !bytes.HasSuffix(res.Stderr, []byte("err")) || !bytes.Contains(res.Stderr, []byte(sentinelPrefix)) {
		t.Errorf("stderr = %q, want the sentinel and err", res.Stderr)
	}
	if len(res.Log) != len(res.Stdout)+len(res.Stderr) {
		t.Errorf("log %d bytes, want stdout + stderr = %d", len(res.Log), len(res.Stdout)+len(res.Stderr))
	}
}

func TestRunEnvironment(t *testing.T) {
	e := scratch(t, "printf '%s\\n' \"PWD=$PWD\" \"HOME=$HOME\" \"PATH=$PATH\" \"ARG0=$0\"; env | grep -c . >count\n")
	work := filepath.Join(t.TempDir(), "w")
	res, err := e.Run(t.Context(), RunOptions{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PWD=" + work, "HOME=" + work, "PATH=" + DefaultPath, "ARG0=./build_script.sh"} {
		if !strings.Contains(string(res.Stdout), want+"\n") {
			t.Errorf("stdout %q lacks %q", res.Stdout, want)
		}
	}
}

func TestRunWorkDirRefusals(t *testing.T) {
	e := reference(t, "generic")
	for _, dir := range []string{"", "relative/dir", "/", "/var", "/var/tmp/../tmp/x", e.Dir, filepath.Dir(e.Dir), filepath.Join(e.Dir, "sub")} {
		if _, err := e.Run(t.Context(), RunOptions{WorkDir: dir}); err == nil {
			t.Errorf("Run(WorkDir %q) = nil error, want a refusal", dir)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "build_script.sh")); err != nil {
		t.Fatalf("the exercise was touched: %v", err)
	}
}

func TestFreshCopy(t *testing.T) {
	src := tree(t, map[string]string{
		"a/run.sh":    "#!/bin/sh\n",
		"a/data.txt":  "x",
		"a/link":      "-> data.txt",
		"a/sub/deep/": "",
	})
	from := filepath.Join(src, "a")
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chmod(filepath.Join(from, "run.sh"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(from, "data.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x", "testing-dir")
	if err := FreshCopy(from, dst); err != nil {
		t.Fatal(err)
	}
	for _, left := range []string{"left-by-run", "sub/deep/left", "dir-left/f"} {
		p := filepath.Join(dst, left)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, 0o500); err != nil { // a run may leave it so
		t.Fatal(err)
	}
	if err := FreshCopy(from, dst); err != nil {
		t.Fatal(err)
	}
	for _, left := range []string{"left-by-run", "sub/deep/left", "dir-left"} {
		if _, err := os.Lstat(filepath.Join(dst, left)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of the previous run survived the fresh copy: %v", left, err)
		}
	}
	// The directory itself stays (a lane's bind mount on it would go with
	// it), with the copy's mode.
	after, err := os.Stat(dst)
	srcInfo, serr := os.Stat(from)
	if err != nil || serr != nil || !os.SameFile(before, after) {
		t.Errorf("the fresh copy replaced the directory at dst: %v, %v", err, serr)
	} else if after.Mode().Perm() != srcInfo.Mode().Perm() {
		t.Errorf("dst's mode %v, want the source's %v", after.Mode().Perm(), srcInfo.Mode().Perm())
	}
	// A link at dst is replaced, never followed.
	elsewhere := t.TempDir()
	keep := filepath.Join(elsewhere, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(t.TempDir(), "testing-dir")
	if err := os.Symlink(elsewhere, linked); err != nil {
		t.Fatal(err)
	}
	if err := FreshCopy(from, linked); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the fresh copy emptied the directory a link at dst names: %v", err)
	}
	if fi, err := os.Lstat(linked); err != nil || !fi.IsDir() {
		t.Errorf("the link at dst was not replaced by the copy: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("run.sh mode = %v, %v; want 0750", st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(dst, "data.txt")); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("data.txt mtime = %v, %v; want %v", st.ModTime(), err, old)
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "data.txt" {
		t.Errorf("link = %q, %v; want a link to data.txt", l, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "sub", "deep")); err != nil || !st.IsDir() {
		t.Errorf("sub/deep = %v; want a folder", err)
	}
}

// TestRunCopyDir: with CopyDir the fresh copy and the reports are there
// and WorkDir is left alone; the command still gets WorkDir as HOME. The
// prefix `env -C <copy>` stands in for a lane's bind mount.
func TestRunCopyDir(t *testing.T) {
	e := scratch(t, "mkdir -p test-reports; printf '%s\\n' '<testsuite><testcase name=\"a\"/></testsuite>' >test-reports/r.xml; printf '%s\\n' \"HOME=$HOME\" >home\n")
	work, cp := filepath.Join(t.TempDir(), "w"), filepath.Join(t.TempDir(), "c")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(t.Context(), RunOptions{WorkDir: work, CopyDir: cp, Prefix: []string{"env", "-C", cp}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 0 || len(res.Reports) != 1 || res.Reports[0].Err != nil {
		t.Fatalf("status %d, reports %+v, log %s; want 0 and the one report read from the copy", res.Status, res.Reports, res.Log)
	}
	if res.MaxRSSKiB <= 0 {
		t.Errorf("MaxRSSKiB = %d, want the run's peak (bash's at least)", res.MaxRSSKiB)
	}
	if b, err := os.ReadFile(filepath.Join(cp, "home")); err != nil || string(b) != "HOME="+work+"\n" {
		t.Errorf("the copy's home file = %q, %v; want HOME=%s", b, err, work)
	}
	if _, err := os.Stat(filepath.Join(work, "keep")); err != nil {
		t.Errorf("WorkDir was not left alone: %v", err)
	}
	if _, err := e.Run(t.Context(), RunOptions{WorkDir: work, CopyDir: e.Dir}); err == nil {
		t.Error("CopyDir = the exercise folder: nil error, want a refusal")
	}
}
