package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// consoleLines returns the last n lines of a console capture, '\r' and
// trailing blank lines removed.
func consoleLines(b []byte, n int) []string {
	s := strings.ReplaceAll(string(b), "\r", "")
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// conclude reads the console and decides the run once QEMU is gone: the
// command's status, a setup failure or an indeterminate run; it unpacks
// the results of a trustworthy one.
func (g *guestRun) conclude(ctx context.Context, ch *guestChannels, w *waitState, q *qemuProcess, stuck bool) error {
	res, o := g.res, g.o
	console, _ := os.ReadFile(g.consolePath)
	// Split once; the tail, the OOM kills and PID 1's witness all read it.
	all := consoleLines(console, len(console)+1)
	res.ConsoleTail = all[max(0, len(all)-consoleTailLines):]
	res.OOMKills = oomKills(all)
	res.Signaled = signaledLine(all)
	if res.Signaled != "" && len(res.OOMKills) == 0 {
		g.log.Warn("the command died by a signal no OOM killer sent", "guest", res.Signaled)
	}
	for _, l := range res.OOMKills {
		g.log.Warn("the guest ran out of memory and its kernel killed a process", "mem_mb", o.MemMB, "console", l)
	}
	if stuck {
		res.Reason = "channel readers did not finish after QEMU exited"
		return fmt.Errorf("%w: %s", ErrIndeterminate, res.Reason)
	}
	if w.interrupted {
		res.Reason = "interrupted: " + ctx.Err().Error()
		return fmt.Errorf("%w: interrupted: %w", ErrIndeterminate, ctx.Err())
	}
	g.mu.Lock()
	guestError := g.guestError
	g.mu.Unlock()
	v := judge(outcome{
		console: console, deadline: w.deadline, events: ch.evErr, done: ch.evDone,
		results: ch.resErr, resultsSHA256: ch.sum, resultsBytes: int64(len(ch.payload)), guestError: guestError,
	})
	if v.setup {
		res.Status, res.Reason = proto.StatusSetupFailed, v.reason
		return fmt.Errorf("%w: %s", ErrGuestSetup, res.Reason)
	}
	problems := v.problems
	if len(problems) == 0 && o.ResultsDir != "" && len(ch.payload) > 0 {
		n, err := guest.UnpackResults(ch.payload, o.ResultsDir)
		res.ResultsFiles = n
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return g.indeterminate(problems, q, w.stopped)
	}
	res.Status = v.status
	return nil
}

// indeterminate sets status 3 with problems as the reason, adding how QEMU
// ended when it ended on its own or was killed from outside (the host's OOM
// killer, a person), which leaves no message of its own.
func (g *guestRun) indeterminate(problems []string, q *qemuProcess, stopped bool) error {
	res := g.res
	if q.waitErr != nil && !stopped {
		problems = append(problems, "QEMU ended before lockstep stopped it: "+q.waitErr.Error())
	}
	if q.waitErr != nil && !strings.Contains(q.out.String(), "terminating on signal") {
		if msg := strings.TrimSpace(q.out.String()); msg != "" {
			problems = append(problems, "QEMU said: "+lastLine([]byte(msg)))
		}
	}
	res.Status = proto.StatusIndeterminate
	res.Reason = strings.Join(problems, "; ")
	g.log.Debug("indeterminate run", "qemu", res.QEMUCommand)
	return fmt.Errorf("%w: %s", ErrIndeterminate, res.Reason)
}

// oomKillMarks are in the line the kernel's OOM killer prints (at
// KERN_ERR, so even a quiet console shows it) for each process it kills:
// "Out of memory: Killed process …", or "Memory cgroup out of memory:
// Killed process …" when a cgroup's limit was reached.
var oomKillMarks = []string{"Out of memory: Killed process ", "out of memory: Killed process "}

// maxOOMKills bounds the OOM-killer lines kept from one console.
const maxOOMKills = 10

// oomKills returns the first OOM-killer lines of the console's lines
// (consoleLines).
func oomKills(lines []string) []string {
	var out []string
	for _, l := range lines {
		if len(out) == maxOOMKills {
			break
		}
		for _, m := range oomKillMarks {
			if strings.Contains(l, m) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	return out
}

// signaledLine returns PID 1's line about a command that died by a signal,
// without its prefix, or "", from the console's lines (consoleLines).
func signaledLine(lines []string) string {
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, proto.SignaledPrefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// outcome is everything the channels delivered once QEMU is gone.
type outcome struct {
	console  []byte
	deadline string      // why a deadline passed; "" if none did
	events   error       // the event stream's error (gap, missing done, …)
	done     *proto.Done // the done event, nil without one
	results  error       // the results frame's error
	// resultsSHA256 and resultsBytes describe the frame received.
	resultsSHA256 string
	resultsBytes  int64
	guestError    string // the last error event's message
}

// verdict is what an outcome means: a guest setup failure (status 70 and
// its reason), or the command's status when problems is empty, or
// indeterminate because of problems.
type verdict struct {
	setup    bool
	reason   string
	status   int
	problems []string
}

// judge decides a run from what arrived: the status is the command's only
// when the console line, the done event and the results frame agree and
// arrived whole.
func judge(o outcome) verdict {
	status, ok := proto.ParseStatus(o.console)
	if ok && status == proto.StatusSetupFailed {
		reason := proto.ParseSetupError(o.console)
		if reason == "" {
			reason = o.guestError
		}
		if reason == "" {
			reason = "the guest reported status 70 without a reason"
		}
		return verdict{setup: true, reason: reason, status: status}
	}
	var problems []string
	if o.deadline != "" {
		problems = append(problems, o.deadline)
	}
	if !ok {
		problems = append(problems, "no LOCKSTEP-STATUS line on the console")
	}
	if o.events != nil {
		problems = append(problems, o.events.Error())
	} else if o.done == nil {
		problems = append(problems, "no done event")
	}
	// Without a done event a frame that was cut short is still worth
	// naming; one that never started (EOF before its header) is not.
	if o.done == nil && o.results != nil && !errors.Is(o.results, io.EOF) {
		problems = append(problems, o.results.Error())
	}
	if o.done != nil {
		if ok && o.done.Status != status {
			problems = append(problems, fmt.Sprintf("console status %d differs from the done event's %d", status, o.done.Status))
		}
		switch {
		case o.results != nil:
			problems = append(problems, o.results.Error())
		case o.done.ResultsSHA256 != o.resultsSHA256 || o.done.ResultsBytes != o.resultsBytes:
			problems = append(problems, fmt.Sprintf("results frame sha256 %s (%d bytes) differs from the done event's %s (%d bytes)",
				o.resultsSHA256, o.resultsBytes, o.done.ResultsSHA256, o.done.ResultsBytes))
		}
	}
	return verdict{status: status, problems: problems}
}

// endHung saves forensics, then asks QEMU to quit; the caller kills it.
func (g *guestRun) endHung(qmpPath, consolePath string, argv []string, reason string) {
	m, err := dialQMP(qmpPath, qmpTimeout)
	if err != nil {
		g.log.Warn("no QMP for forensics", "err", err)
		m = nil
	}
	console, _ := os.ReadFile(consolePath)
	text := forensics(m, reason, argv, consoleLines(console, consoleTailLines))
	dir := g.o.ForensicsDir
	if dir == "" {
		dir = g.o.ResultsDir
	}
	if dir == "" {
		dir = filepath.Join(CacheDir(), "forensics", g.res.JobID)
	}
	path := filepath.Join(dir, ForensicsFile)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err := safefile.WriteFile(path, []byte(text), 0o644); err == nil {
			g.res.ForensicsFile = path
		}
	}
	if g.res.ForensicsFile == "" {
		g.log.Warn("cannot save forensics", "dir", dir)
	} else {
		g.log.Warn("forensics saved", "file", g.res.ForensicsFile)
	}
	if m != nil {
		m.quit()
		m.close()
	}
}

// quit asks QEMU to quit through QMP, within timeout.
func (g *guestRun) quit(qmpPath string, timeout time.Duration) {
	m, err := dialQMP(qmpPath, timeout)
	if err != nil {
		return
	}
	m.quit()
	m.close()
}
