package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// The files lockstep reads and writes, tried the ways that once broke them:
// through the real binary, with real FIFOs, /dev/zero, symbolic links and
// directories.

// filesBinDir holds the binary the tests below share; TestMain removes it.
var filesBinDir string

var filesBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "lockstep-files-test.")
	if err != nil {
		return "", err
	}
	filesBinDir = dir
	bin := filepath.Join(dir, "lockstep")
	return bin, lockstepbin.BuildTo(bin)
})

// lockstepIn runs the binary in dir and returns its status, stdout and
// stderr. A run that has not ended after 20 s fails t: it hung on a file.
// Its address space is capped at 2 GiB, so a read that never ends (the bug
// on /dev/zero) fails the test, not the machine.
func lockstepIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	bin, err := filesBin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `ulimit -v 2097152 && exec "$0" "$@"`, bin}, args...)...)
	cmd.Dir = dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("lockstep %q did not end in 20 s: it waits on a file\nstderr: %s", args, errb.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// notFiles makes a FIFO, a link to it and a directory, with /dev/zero: the
// paths a reader must refuse, each with how the refusal names it.
func notFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.cfg")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.cfg")
	if err := os.Symlink("fifo.cfg", link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.cfg")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return map[string]string{fifo: "named pipe", link: "named pipe", "/dev/zero": "character device", sub: "directory"}
}

// TestPolicyRefusesSpecialFiles: `policy fmt` on a FIFO hung and ignored
// SIGINT and SIGTERM; on /dev/zero it read until out of memory (item 11).
// Every policy subcommand refuses them now, at once, naming the path.
func TestPolicyRefusesSpecialFiles(t *testing.T) {
	for path, kind := range notFiles(t) {
		for _, args := range [][]string{
			{"policy", "fmt", path}, {"policy", "fmt", "-w", path}, {"policy", "fmt", "-l", path},
			{"policy", "check", path}, {"policy", "hash", path}, {"policy", "union", path},
		} {
			code, out, errs := lockstepIn(t, "/", args...)
			if code != cli.ExitFail || out != "" && !strings.Contains(out, ": 1 problem\n") || !strings.Contains(errs, path) || !strings.Contains(errs, kind) {
				t.Errorf("lockstep %q = %d\nstdout %q\nstderr %q\nwant 1, naming %s and %q", args, code, out, errs, path, kind)
			}
		}
	}
}

// TestOrchestrateSummaryFIFO: `orchestrate --summary <fifo>` hung after the
// tree was swapped (item 11). It is refused before the merge now.
func TestOrchestrateSummaryFIFO(t *testing.T) {
	dir := t.TempDir()
	path, core, fifo := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core"), filepath.Join(dir, "summary.md")
	copyFixture(t, path)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := lockstepIn(t, dir, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core, "--summary", fifo)
	if code != cli.ExitFail || !strings.Contains(errs, fifo+": is a named pipe; want a regular file") || !strings.Contains(errs, "nothing was written") {
		t.Errorf("orchestrate --summary <fifo> = %d\n%s\nwant 1 naming the FIFO, nothing written", code, errs)
	}
	if _, err := os.Stat(core); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused merge wrote %s: %v", core, err)
	}
}

// TestOrchestrateSummaryDirectory: `orchestrate --summary <a directory>`
// exited 1 after the tree was swapped, though exit 1 means the previous tree
// is unchanged (item 12). The summary is opened before the merge now.
func TestOrchestrateSummaryDirectory(t *testing.T) {
	dir := t.TempDir()
	path, core, md := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core"), filepath.Join(dir, "summary.d")
	copyFixture(t, path)
	if code, _, errs := lockstepIn(t, dir, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core); code != cli.ExitOK {
		t.Fatalf("first merge = %d\n%s", code, errs)
	}
	before := treeFiles(t, core)
	if err := os.Mkdir(md, 0o755); err != nil {
		t.Fatal(err)
	}
	// With python added, a merge that went through would change the tree.
	code, _, errs := lockstepIn(t, dir, "orchestrate", "--langs", "java,python", "--path-dir", path, "--core-dir", core, "--summary", md)
	if code != cli.ExitFail || !strings.Contains(errs, md+": is a directory; want a regular file") {
		t.Errorf("orchestrate --summary <dir> = %d\n%s\nwant 1 naming the directory", code, errs)
	}
	if after := treeFiles(t, core); after != before {
		t.Errorf("exit %d, yet the tree changed:\nbefore %s\nafter  %s", code, before, after)
	}
}

// treeFiles lists a tree's files with their contents, one line each.
func treeFiles(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		b.WriteString(p + " " + string(data) + "\n")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestOrchestrateCoreDirItself: `--core-dir .` and `..` copied the tree into
// itself, failed and left lock files (item 13). They are refused up front.
func TestOrchestrateCoreDirItself(t *testing.T) {
	dir := t.TempDir()
	path, core := filepath.Join(dir, "path_sets"), filepath.Join(dir, "core")
	copyFixture(t, path)
	if code, _, errs := lockstepIn(t, dir, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", core); code != cli.ExitOK {
		t.Fatalf("first merge = %d\n%s", code, errs)
	}
	before := treeFiles(t, dir)
	for _, tc := range []struct{ cwd, core string }{{core, "."}, {filepath.Join(core, "exercises"), ".."}} {
		code, _, errs := lockstepIn(t, tc.cwd, "orchestrate", "--langs", "java", "--path-dir", path, "--core-dir", tc.core)
		if code != cli.ExitFail || !strings.Contains(errs, "is or holds the current directory") || !strings.Contains(errs, "nothing was written") {
			t.Errorf("orchestrate --core-dir %s in %s = %d\n%s\nwant 1, refused", tc.core, tc.cwd, code, errs)
		}
		if after := treeFiles(t, dir); after != before {
			t.Errorf("--core-dir %s left files or changed the tree:\nbefore %s\nafter  %s", tc.core, before, after)
		}
	}
}

// TestKernelVerifyFIFO: `kernel verify` with a FIFO as the cached bzImage
// hung (item 11). It names the bzImage and fails now.
func TestKernelVerifyFIFO(t *testing.T) {
	pin, err := kernel.Lookup(kernel.DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	key, err := (&kernel.Builder{CacheDir: cache}).Key(pin)
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(cache, key)
	if err := os.Mkdir(entry, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := &kernel.Record{Key: key, Pin: pin.Row, Version: pin.Version, BzImageSHA256: strings.Repeat("0", 64), ConfigSHA256: strings.Repeat("0", 64)}
	if err := os.WriteFile(filepath.Join(entry, kernel.RecordName), rec.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := (&kernel.Builder{CacheDir: cache}).Required(pin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(entry, kernel.ConfigName), []byte(strings.Join(req, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bz := filepath.Join(entry, kernel.BzImageName)
	if err := syscall.Mkfifo(bz, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := lockstepIn(t, "/", "kernel", "verify", "--cache", cache)
	if code != cli.ExitFail || out != "" || !strings.Contains(errs, "bzImage: read "+bz+": is a named pipe; want a regular file") {
		t.Errorf("kernel verify with a FIFO bzImage = %d\nstdout %q\nstderr %q\nwant 1 naming the bzImage", code, out, errs)
	}
}

// TestPolicyFmtWriteSymlink: `policy fmt -w` on a symbolic link replaced the
// link with a file, left the target unformatted and, as root, changed the
// owner (item 14). The target is rewritten now; link, mode and owner stay.
func TestPolicyFmtWriteSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "shared", "p.cfg")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("[write]\n/tmp\n[read]\n/usr   # system\n/etc\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(target, 12345, 23456); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "p.cfg")
	if err := os.Symlink("shared/p.cfg", link); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := lockstepIn(t, dir, "policy", "fmt", "-w", "p.cfg"); code != cli.ExitOK {
		t.Fatalf("policy fmt -w p.cfg = %d\n%s", code, errs)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("p.cfg after fmt -w: %v, %v; want the symbolic link kept", st.Mode(), err)
	}
	if code, out, errs := lockstepIn(t, dir, "policy", "fmt", "-l", target); code != cli.ExitOK || out != "" {
		t.Errorf("policy fmt -l on the target = %d %q %s; want it in canonical form", code, out, errs)
	}
	st, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o640 {
		t.Errorf("target mode = %v, want -rw-r----- kept", st.Mode())
	}
	if sys := st.Sys().(*syscall.Stat_t); root && (sys.Uid != 12345 || sys.Gid != 23456) {
		t.Errorf("target owner = %d:%d, want 12345:23456 kept", sys.Uid, sys.Gid)
	}
}

// TestPolicyCheckExerciseAgreesWithRun: `policy check --exercise` called a
// path under a file (ENOTDIR) and a 300-byte name (ENAMETOOLONG) ok, while
// run counts the first missing and refuses the second (item 15).
func TestPolicyCheckExerciseAgreesWithRun(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "notdir.cfg")
	if err := os.WriteFile(notDir, []byte(truePolicy+"[read]\n/etc/passwd/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long.cfg")
	longPath := "/tmp/" + strings.Repeat("a", 300)
	if err := os.WriteFile(long, []byte(truePolicy+"[write]\n"+longPath+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := lockstepIn(t, dir, "policy", "check", "--exercise", notDir)
	if code != cli.ExitFail || !strings.Contains(errs, `names "/etc/passwd/x" in [read], [execute] or [ioctl], and it does not exist here`) {
		t.Errorf("check --exercise on /etc/passwd/x = %d\n%s\nwant 1, missing", code, errs)
	}
	if code, _, errs := lockstepIn(t, dir, "run", "--config", notDir, "--", "true"); code != cli.ExitOK || !strings.Contains(errs, "missing=1") {
		t.Errorf("run on /etc/passwd/x = %d\n%s\nwant 0 with missing=1", code, errs)
	}
	code, _, errs = lockstepIn(t, dir, "policy", "check", "--exercise", long)
	if code != cli.ExitFail || !strings.Contains(errs, "cannot be inspected here (file name too long); lockstep run refuses it") {
		t.Errorf("check --exercise on a 300-byte name = %d\n%s\nwant 1, refused as run refuses it", code, errs)
	}
	if code, _, errs := lockstepIn(t, dir, "run", "--config", long, "--", "true"); code != cli.ExitRefused || !strings.Contains(errs, "file name too long") {
		t.Errorf("run on a 300-byte name = %d\n%s\nwant %d", code, errs, cli.ExitRefused)
	}
}
