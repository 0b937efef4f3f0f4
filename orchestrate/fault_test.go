package orchestrate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/internal/fulldisk"
)

// TestDiskFull merges onto a real tmpfs that has run out of space: the
// merge fails naming ENOSPC, the previous tree is as it was, and no
// temporary sibling is left; once there is room again the next merge
// writes the new tree.
func TestDiskFull(t *testing.T) {
	e := newEnv(t)
	e.core = filepath.Join(fulldisk.Mount(t, 1<<20), "core")
	before := e.merged(t)
	e.addNewRow(t)
	filler := fulldisk.Fill(t, filepath.Dir(e.core), "filler", 0)
	_, err := Run(e.opts())
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "(the previous tree is unchanged)") {
		t.Fatalf("Run on a full disk = %v; want ENOSPC saying the previous tree is unchanged", err)
	}
	e.kept(t, before, "a merge that met a full disk")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(e.opts()); err != nil {
		t.Fatalf("the merge after space was freed: %v", err)
	}
	if got := readTree(t, e.core); !hasNewRow(got) {
		t.Errorf("the merge after space was freed did not write the new base:\n%s", got["BaseLanguage-java.cfg"])
	}
}

// TestTwoMergesOneTree runs two merges of one tree at once in two
// processes: a child stops itself (SIGSTOP) holding the lock with its new
// tree built; the merge started meanwhile is refused ("another merge is
// writing"), leaving the tree as it was; the child, continued, completes
// its tree and leaves no temporary.
func TestTwoMergesOneTree(t *testing.T) {
	e := newEnv(t)
	before := e.merged(t)
	e.addNewRow(t)

	child := exec.Command(os.Args[0], "-test.run=^TestStoppedMergeChild$", "-test.count=1")
	child.Env = append(os.Environ(), "LOCKSTEP_TEST_STOP_AT="+string(stageBuilt), "LOCKSTEP_TEST_PATH="+e.path, "LOCKSTEP_TEST_CORE="+e.core)
	var out strings.Builder
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Process.Kill()
		child.Wait()
	}()
	if err := waitStopped(child.Process.Pid, time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if _, err := Run(e.opts()); err == nil || !strings.Contains(err.Error(), "another merge is writing") {
		t.Fatalf("a merge beside a stopped one = %v; want refused: another merge is writing", err)
	}
	if treeHash(t, e.core) != before { // the stopped merge's new tree is beside it
		t.Error("the refused merge changed the tree")
	}
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("the continued merge: %v\n%s", err, out.String())
	}
	if !hasNewRow(readTree(t, e.core)) {
		t.Errorf("the continued merge did not complete its tree")
	}
	if s := siblings(t, e.core); len(s) != 0 {
		t.Errorf("temporaries left: %v", s)
	}
}

// TestStoppedMergeChild is TestTwoMergesOneTree's child: with
// LOCKSTEP_TEST_STOP_AT set it merges and stops itself at that stage of the
// writer, holding the lock, until SIGCONT. Without it, it does nothing.
func TestStoppedMergeChild(t *testing.T) {
	at := os.Getenv("LOCKSTEP_TEST_STOP_AT")
	if at == "" {
		return
	}
	o := Options{Langs: []string{"java", "python"}, PathDir: os.Getenv("LOCKSTEP_TEST_PATH"), CoreDir: os.Getenv("LOCKSTEP_TEST_CORE")}
	o.hook = func(s stage) error {
		if string(s) != at {
			return nil
		}
		// The stop goes to this thread (tgkill), not the process: kill(2)
		// to our own pid wakes the main thread to take it, and this one
		// ran on into the exchange before the group stop reached it (10
		// of 30 runs: "the refused merge changed the tree"). A thread
		// takes its own signal on the way out of the call.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGSTOP)
	}
	if _, err := Run(o); err != nil {
		t.Fatal(err)
	}
}

// waitStopped waits until process pid is stopped by a signal (state T in
// /proc/<pid>/stat).
func waitStopped(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return fmt.Errorf("the child merge exited before stopping: %w", err)
		}
		// The state follows the parenthesised command name.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the child merge did not stop within %v", limit)
}
