package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest"
	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// guestRun is one booted guest's state while Run waits for it.
type guestRun struct {
	o   *Options
	res *Result
	log *slog.Logger

	argv                 []string // QEMU's command line, argv[0] the binary
	consolePath, qmpPath string
	evL, resL            net.Listener // the events and results channels
	inL                  net.Listener // the input channel, nil without Options.Input
	deadlines            deadlines

	mu         sync.Mutex
	exitStatus *int
	guestError string
}

// qemuProcess is the running QEMU: exited closes when it has been waited
// for, and waitErr is Wait's error, read only after exited.
type qemuProcess struct {
	cmd     *exec.Cmd
	out     *limitedBuffer // the first 64 KiB of QEMU's own output
	started time.Time
	exited  chan struct{}
	waitErr error
}

// guestChannels is what the events and results readers deliver. hello and
// jobDone close as those events arrive; the other fields belong to the
// readers until readers.Wait returns.
type guestChannels struct {
	hello, jobDone chan struct{}
	readers        sync.WaitGroup

	evErr   error
	evDone  *proto.Done
	payload []byte
	sum     string
	resErr  error
}

// waitState is where the wait for the guest ended.
type waitState struct {
	phase      string // boot, job or shutdown
	limit      time.Duration
	phaseStart time.Time
	deadline   string // why a deadline passed; "" if none did
	// interrupted is set when ctx ended. stopped is set once lockstep
	// itself ends QEMU (a deadline, an interrupt); an exit before that is
	// QEMU's own, or an outside kill's.
	interrupted, stopped bool
}

// boot starts QEMU, follows the guest through its phases and decides the
// run from what arrived.
func (g *guestRun) boot(ctx context.Context) error {
	// QEMU must not die with ctx before forensics or quit: it gets its own
	// context, cancelled on every path out of here.
	qctx, qcancel := context.WithCancel(context.Background())
	defer qcancel()
	q, err := g.startQEMU(qctx)
	if err != nil {
		return err
	}
	defer func() {
		qcancel() // kills the process group if it still runs
		<-q.exited
		if ps := q.cmd.ProcessState; ps != nil {
			g.res.Timings.QEMUCPU = ps.UserTime() + ps.SystemTime()
		}
	}()

	ch := g.startReaders(q.exited)
	if g.inL != nil {
		go g.writeInput(q.exited)
	}
	w := g.waitGuest(ctx, ch, q)
	// Give QEMU a moment to leave after quit, then kill its group.
	select {
	case <-q.exited:
	case <-time.After(2 * time.Second):
	}
	qcancel()
	<-q.exited
	if w.phase == "shutdown" && g.res.Timings.Shutdown == 0 {
		g.res.Timings.Shutdown = time.Since(w.phaseStart)
	}
	g.evL.Close()
	g.resL.Close()
	stuck := !ch.finish(5 * time.Second)
	return g.conclude(ctx, ch, w, q, stuck)
}

// startQEMU starts QEMU in its own process group, killed when qctx ends.
func (g *guestRun) startQEMU(qctx context.Context) (*qemuProcess, error) {
	q := &qemuProcess{out: &limitedBuffer{b: new(bytes.Buffer), max: 64 << 10}, exited: make(chan struct{})}
	q.cmd = qemuCommand(qctx, g.argv[0], g.argv[1:], q.out)
	q.started = time.Now()
	if err := q.cmd.Start(); err != nil {
		g.res.Reason = fmt.Sprintf("start QEMU: %v", err)
		return nil, fmt.Errorf("%w: %s", ErrIndeterminate, g.res.Reason)
	}
	go func() { q.waitErr = q.cmd.Wait(); close(q.exited) }()
	return q, nil
}

// startReaders starts reading the events and the results channels, each
// giving up if QEMU exits before the guest connects.
func (g *guestRun) startReaders(exited <-chan struct{}) *guestChannels {
	ch := &guestChannels{hello: make(chan struct{}), jobDone: make(chan struct{})}
	ch.readers.Add(2)
	go func() {
		defer ch.readers.Done()
		g.readEvents(ch, exited)
	}()
	go func() {
		defer ch.readers.Done()
		g.readResults(ch, exited)
	}()
	return ch
}

// readEvents reads the events channel to its end.
func (g *guestRun) readEvents(ch *guestChannels, exited <-chan struct{}) {
	conn, err := acceptUntil(g.evL, exited)
	if err != nil {
		ch.evErr = fmt.Errorf("events channel: %w", err)
		return
	}
	defer conn.Close()
	er := proto.NewEventReader(conn)
	var helloOnce, doneOnce sync.Once
	hello := func() { helloOnce.Do(func() { close(ch.hello) }) }
	jobDone := func() { doneOnce.Do(func() { close(ch.jobDone) }) }
	for {
		e, err := er.Next()
		if err == io.EOF {
			ch.evDone = er.Done()
			return
		}
		if e.Type == proto.EventDone || errors.Is(err, proto.ErrBadCounts) {
			// PID 1 reboots once it has this, and not before: every
			// event up to done has been read by now, and a done whose
			// counts differ gains nothing from a wait.
			_, _ = conn.Write([]byte{proto.EventsAck})
		}
		if err != nil {
			ch.evErr = err
			return
		}
		g.res.Events++
		g.handleEvent(e, hello, jobDone)
	}
}

// handleEvent records one event; hello and jobDone signal those moments.
func (g *guestRun) handleEvent(e proto.Event, hello, jobDone func()) {
	res, o := g.res, g.o
	switch e.Type {
	case proto.EventHello:
		res.KernelRelease = e.Msg
		res.GuestUptimeAtHello = time.Duration(e.UptimeMS) * time.Millisecond
		hello()
	case proto.EventStdout:
		o.Stdout.Write(e.Data)
	case proto.EventStderr:
		o.Stderr.Write(e.Data)
	case proto.EventLog:
		if o.Verbose {
			g.log.Info("guest: "+e.Msg, "uptime_ms", e.UptimeMS)
		} else {
			g.log.Debug("guest: "+e.Msg, "uptime_ms", e.UptimeMS)
		}
	case proto.EventError:
		g.mu.Lock()
		g.guestError = e.Msg
		g.mu.Unlock()
		jobDone()
	case proto.EventExit:
		res.GuestUptimeAtExit = time.Duration(e.UptimeMS) * time.Millisecond
		g.mu.Lock()
		g.exitStatus = e.Status
		g.mu.Unlock()
		jobDone()
	case proto.EventDone:
		jobDone()
	}
}

// readResults reads the results frame.
func (g *guestRun) readResults(ch *guestChannels, exited <-chan struct{}) {
	conn, err := acceptUntil(g.resL, exited)
	if err != nil {
		ch.resErr = fmt.Errorf("results channel: %w", err)
		return
	}
	defer conn.Close()
	ch.payload, ch.sum, ch.resErr = proto.ReadFrame(conn, guest.MaxResults)
	// PID 1 reboots once it has this, and not before: the frame's tail is
	// safe here by now. (A guest gone already makes the write fail.)
	_, _ = conn.Write([]byte{proto.ResultsAck})
}

// writeInput copies Options.Input to the input channel until either
// ends; QEMU holds back what the guest has not read yet.
func (g *guestRun) writeInput(exited <-chan struct{}) {
	conn, err := acceptUntil(g.inL, exited)
	if err != nil {
		g.log.Warn("the input channel did not connect", "err", err)
		return
	}
	defer conn.Close()
	go func() { <-exited; conn.Close() }()
	if _, err := io.Copy(conn, g.o.Input); err != nil {
		g.log.Debug("the input channel ended", "err", err)
	}
}

// finish waits up to timeout for both readers and reports whether they
// finished. QEMU is gone by then, so its sockets are closed; they cannot
// fail to finish unless a writer blocks. Until they do they still own
// their fields, so nothing they write may be read.
func (ch *guestChannels) finish(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { ch.readers.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// waitGuest follows the guest through the boot, job and shutdown phases,
// each under its deadline, until QEMU exits, a deadline passes (forensics
// saved, QEMU asked to quit) or ctx ends (QEMU asked to quit).
func (g *guestRun) waitGuest(ctx context.Context, ch *guestChannels, q *qemuProcess) *waitState {
	res := g.res
	w := &waitState{phase: "boot", limit: g.deadlines.boot, phaseStart: q.started}
	timer := time.NewTimer(w.limit)
	defer timer.Stop()
	next := func(phase string, limit time.Duration) {
		w.phase, w.limit, w.phaseStart = phase, limit, time.Now()
		timer.Reset(limit)
	}
	hello, jobDone := ch.hello, ch.jobDone // nil once seen
	for {
		select {
		case <-q.exited:
			return w
		case <-hello:
			hello = nil
			res.Timings.Boot = time.Since(q.started)
			next("job", g.deadlines.job)
			g.log.Info("guest up; running the command", "boot", res.Timings.Boot.Round(time.Millisecond), "kernel", res.KernelRelease)
		case <-jobDone:
			jobDone = nil
			if hello != nil { // done without hello: a setup failure
				hello = nil
				res.Timings.Boot = time.Since(q.started)
			} else {
				res.Timings.Job = time.Since(w.phaseStart)
			}
			next("shutdown", g.deadlines.shutdown)
		case <-timer.C:
			w.deadline = fmt.Sprintf("the %s phase passed its %v deadline (accel %s)", w.phase, w.limit, res.Accel)
			g.log.Warn("guest deadline passed; saving forensics", "phase", w.phase, "deadline", w.limit)
			w.stopped = true
			g.endHung(g.qmpPath, g.consolePath, g.argv, w.deadline)
			return w
		case <-ctx.Done():
			w.interrupted, w.stopped = true, true
			g.quit(g.qmpPath, time.Second)
			return w
		}
	}
}

// acceptUntil accepts one connection, giving up when QEMU exits.
func acceptUntil(l net.Listener, exited <-chan struct{}) (net.Conn, error) {
	type r struct {
		c   net.Conn
		err error
	}
	ch := make(chan r, 1)
	go func() { c, err := l.Accept(); ch <- r{c, err} }()
	select {
	case x := <-ch:
		return x.c, x.err
	case <-exited:
		l.Close()
		x := <-ch
		if x.c != nil {
			return x.c, nil
		}
		return nil, errors.New("QEMU exited before connecting")
	}
}
