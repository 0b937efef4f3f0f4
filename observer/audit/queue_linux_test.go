package audit

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQueueTakesTurns: while another process holds the machine's collector
// queue, joinQueue waits, names the holder's pid when its wait runs out,
// and gets its turn as soon as the holder lets go; collectors of one
// process share one turn.
func TestQueueTakesTurns(t *testing.T) {
	old := QueueFile
	QueueFile = filepath.Join(t.TempDir(), "audit.lock")
	t.Cleanup(func() { QueueFile = old })
	// Another process holds the queue: flock(1) on the file, writing its pid
	// as a collector does, for 1.5 s.
	holder := exec.Command("flock", QueueFile, "sh", "-c", `echo $$ > "$0"; sleep 1.5`, QueueFile)
	if err := holder.Start(); err != nil {
		t.Skipf("no flock(1): %v", err)
	}
	defer holder.Wait()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if b, _ := os.ReadFile(QueueFile); len(strings.TrimSpace(string(b))) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder never took the queue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	log := slog.New(slog.DiscardHandler)
	_, err := joinQueue(200*time.Millisecond, log)
	if err == nil || !strings.Contains(err.Error(), "another lockstep audit collector (pid ") {
		t.Fatalf("joinQueue while another process holds it = %v, want an error naming the holder", err)
	}
	start := time.Now()
	release, err := joinQueue(10*time.Second, log)
	if err != nil {
		t.Fatalf("joinQueue after the holder lets go: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("waited %v for a holder of 1.5 s", waited)
	}
	b, _ := os.ReadFile(QueueFile)
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("the queue file says %q, want this process's pid", got)
	}
	// A second collector of this process shares the turn at once.
	release2, err := joinQueue(100*time.Millisecond, log)
	if err != nil {
		t.Fatalf("a second joinQueue in the holding process: %v", err)
	}
	release()
	release2()
	release2() // a release given twice is given once
	// Given back: another process can take it now.
	if out, err := exec.Command("flock", "-n", QueueFile, "true").CombinedOutput(); err != nil {
		t.Errorf("the queue is still held after both releases: %v %s", err, out)
	}
}
