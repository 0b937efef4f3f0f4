//go:build linux

package recorder

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// `lockstep record run` without --script on a real pseudo-terminal, as a
// person at a terminal runs it: what is typed reaches python3 -q in the
// guest, a resize of the host's terminal reaches the program's (it reads
// the new size), ^C interrupts the program through the guest's line
// discipline (KeyboardInterrupt, then the prompt again), ^D ends the
// session, the recording holds the typed lines, and lockstep leaves the
// terminal as it found it (canonical mode, echo).
func TestRecordInteractiveGuest(t *testing.T) {
	bz, bin := needGuest(t)
	master, slave, _, err := openPTY(unix.Winsize{Row: 30, Col: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	d := t.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "record", "run", "--name", "hand", "--dir", d, "--kernel", bz, "--", "python3", "-q")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	var out syncBuffer
	go io.Copy(&out, master)
	typeIn := func(s string) {
		if _, err := master.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Minute, &out, ">>> ")
	t.Logf("the prompt after %.1f s", time.Since(t0).Seconds())
	typeIn("import os; print('size', os.get_terminal_size(0))\r")
	waitFor(t, 5*time.Minute, &out, "size os.terminal_size(columns=100, lines=30)")
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 132}); err != nil {
		t.Fatal(err)
	}
	// SIGWINCH reaches lockstep and its window message the guest in their
	// own time (seconds on a loaded host): Python waits for the new size
	// itself, so the check does not depend on how long that takes.
	typeIn("import time; _ = [time.sleep(0.1) for _ in iter(lambda: os.get_terminal_size(0).columns == 132, True)]; print('now', os.get_terminal_size(0))\r")
	waitFor(t, 5*time.Minute, &out, "now os.terminal_size(columns=132, lines=40)")
	typeIn("import time; time.sleep(600)\r")
	time.Sleep(3 * time.Second)
	typeIn("\x03")
	waitFor(t, 5*time.Minute, &out, "KeyboardInterrupt\r\n>>> ")
	typeIn("\x04")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lockstep record run: %v; it wrote %q", err, out.String())
	}
	t.Logf("lockstep record run (interactive): %.1f s", time.Since(t0).Seconds())
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != unix.ICANON|unix.ECHO|unix.ISIG {
		t.Errorf("after lockstep exited the terminal's lflag is %#o: raw mode was not undone", tio.Lflag)
	}
	checkInteractiveSession(t, filepath.Join(d, "hand", SessionsDir, "001"))
}

// checkInteractiveSession reads the session TestRecordInteractiveGuest typed.
func checkInteractiveSession(t *testing.T, dir string) {
	t.Helper()
	tr, err := os.ReadFile(filepath.Join(dir, TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"print('now', os.get_terminal_size(0))", "now os.terminal_size(columns=132, lines=40)", "KeyboardInterrupt"} {
		if !strings.Contains(string(tr), want) {
			t.Errorf("the transcript lacks %q:\n%s", want, tr)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, SessionFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec SessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Interactive || rec.HungUp || len(rec.Uses) == 0 || rec.Failed() != "" {
		t.Errorf("session: interactive %v, hung up %v, %d uses, failed %q: want an interactive session with uses",
			rec.Interactive, rec.HungUp, len(rec.Uses), rec.Failed())
	}
}

// An interactive `lockstep record run` puts its terminal in raw mode
// while the guest boots, and a signal that ends it early (SIGTERM,
// SIGHUP, SIGQUIT) still leaves the terminal as it found it.
func TestRecordInteractiveSignalRestoresTerminal(t *testing.T) {
	bz, bin := needGuest(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			master, slave, _, err := openPTY(Window)
			if err != nil {
				t.Fatal(err)
			}
			defer master.Close()
			defer slave.Close()
			cmd := exec.CommandContext(t.Context(), bin, "record", "run", "--name", "sig", "--dir", t.TempDir(), "--kernel", bz, "--", "python3", "-q")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var out syncBuffer
			go io.Copy(&out, master)
			waitFor(t, 5*time.Minute, &out, "interactive session")
			lflag := func() uint32 {
				tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
				if err != nil {
					t.Fatal(err)
				}
				return tio.Lflag & (unix.ICANON | unix.ECHO | unix.ISIG)
			}
			deadline := time.Now().Add(30 * time.Second)
			for lflag() != 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if got := lflag(); got != 0 {
				t.Fatalf("the terminal's lflag has %#o while the guest boots: want raw mode", got)
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			if got := lflag(); got != unix.ICANON|unix.ECHO|unix.ISIG {
				t.Errorf("after %v the terminal's lflag has %#o: raw mode was not undone; lockstep wrote %q", sig, got, out.String())
			}
		})
	}
}
