package audit

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// QueueFile is the lock every lockstep collector on a machine holds while it
// is the audit daemon. The kernel has one unicast slot; without a queue a
// second collector (a second `lockstep observe`, or two test packages of one
// `go test ./...`) polls the slot for SlotWait and then fails, however soon
// the first would have finished. With it, lockstep's own collectors take
// turns, and SlotWait is left for a daemon that is not lockstep's (auditd).
// It is a variable so that tests can point it at a file of their own.
var QueueFile = "/run/lockstep-audit.lock"

// DefaultQueueWait is how long Start waits its turn behind another lockstep
// collector: longer than any observed run the observer makes.
const DefaultQueueWait = 30 * time.Minute

// The queue is taken once per process: collectors of one process (a test
// binary's tests, one after another) share the turn instead of waiting on
// themselves.
var queueMu sync.Mutex
var queueHeld struct {
	f *os.File
	n int
}

// joinQueue waits up to wait for this process's turn on QueueFile and
// returns the function that gives it back. Where QueueFile cannot be opened
// (no /run, no root) there is no queue and the slot wait alone applies.
func joinQueue(wait time.Duration, log *slog.Logger) (release func(), err error) {
	queueMu.Lock()
	defer queueMu.Unlock()
	if queueHeld.f == nil {
		f, err := takeQueue(wait, log)
		if err != nil || f == nil {
			return func() {}, err
		}
		queueHeld.f = f
	}
	queueHeld.n++
	var once sync.Once
	return func() { once.Do(leaveQueue) }, nil
}

func leaveQueue() {
	queueMu.Lock()
	defer queueMu.Unlock()
	if queueHeld.n--; queueHeld.n == 0 {
		queueHeld.f.Close() // closing the last descriptor drops the lock
		queueHeld.f = nil
	}
}

// takeQueue locks QueueFile exclusively, polling so that the wait is
// bounded, and writes this process's pid into it for the next in line.
func takeQueue(wait time.Duration, log *slog.Logger) (*os.File, error) {
	f, err := os.OpenFile(QueueFile, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		log.Debug("no audit collector queue", "file", QueueFile, "err", err)
		return nil, nil
	}
	deadline := time.Now().Add(wait)
	for logged := false; ; logged = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("audit collector: lock %s: %w", QueueFile, err)
		}
		holder := queueHolder(f)
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("audit collector: another lockstep audit collector (pid %s) held its turn (%s) for %v", holder, QueueFile, wait)
		}
		if !logged {
			log.Info("waiting for another lockstep audit collector to finish", "holder", holder, "up_to", wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queueHolder is the pid the holder wrote into the queue file, or "?".
func queueHolder(f *os.File) string {
	b := make([]byte, 16)
	n, _ := f.ReadAt(b, 0)
	if s := strings.TrimSpace(string(b[:n])); s != "" {
		return s
	}
	return "?"
}
