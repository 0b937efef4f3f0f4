//go:build linux

package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	libaudit "github.com/elastic/go-libaudit/v2"

	"github.com/lockstep-sandbox/lockstep/internal/auditnl"
)

// DefaultBacklogLimit is the audit backlog the collector sets: Landlock
// allocates its records with GFP_ATOMIC, so a record that finds the queue
// full is lost at once rather than waiting.
const DefaultBacklogLimit = 8192

// typeUser is AUDIT_USER (1005), the user message the collector sends as an
// in-band barrier through the kernel's audit queue.
const typeUser = 1005

// Options configures a Collector. The zero value is usable.
type Options struct {
	// BacklogLimit is the kernel's audit_backlog_limit to set; zero means
	// DefaultBacklogLimit.
	BacklogLimit uint32
	// DropWhenFull sets the kernel's backlog wait time to 0, so a record
	// that finds the backlog full is dropped (and counted lost) at once
	// instead of its task waiting for room. Only for provoking loss in
	// tests; the previous wait time is restored on Close.
	DropWhenFull bool
	// Raw, if not nil, receives every record the collector reads as one
	// line "<type> <netlink body>", in arrival order: a capture of the
	// netlink form.
	Raw io.Writer
	// SlotWait bounds how long Start waits while another daemon holds the
	// unicast slot (another collector closing, a parallel test); zero means
	// DefaultSlotWait.
	SlotWait time.Duration
	// QueueWait bounds how long Start waits its turn behind another
	// lockstep collector on this machine (QueueFile); zero means
	// DefaultQueueWait.
	QueueWait time.Duration
	// Log receives debug messages; nil discards them.
	Log *slog.Logger
}

// DefaultSlotWait is how long Start waits for the audit daemon slot.
const DefaultSlotWait = 30 * time.Second

// Status is the kernel's audit status (struct audit_status).
type Status struct {
	Enabled      uint32 // 0 off, 1 on, 2 on and locked
	PID          uint32 // the registered audit daemon, 0 for none
	RateLimit    uint32 // records per second, 0 unlimited
	BacklogLimit uint32
	Lost         uint32 // records the kernel dropped since boot
	Backlog      uint32 // records queued now
}

// Collector reads audit records as the registered audit daemon (unicast).
// Start it before any workload; Close it to unregister.
type Collector struct {
	reader *libaudit.AuditClient // registered daemon socket: records only, after Start
	conn   *auditnl.Conn         // the reader's socket, whose deadline stops the loop
	ctl    *libaudit.AuditClient // status queries and barrier messages
	ctlMu  sync.Mutex
	raw    io.Writer
	log    *slog.Logger

	mu       sync.Mutex
	runs     map[*Run]bool
	received uint64
	barriers map[string]bool
	fatal    error

	stop chan struct{}
	done chan struct{}
	nbar uint64
	// prev is the status found at Start, restored by Close.
	prev *libaudit.AuditStatus
	// leave gives the machine's collector queue back (QueueFile).
	leave func()
}

// Start enables audit, sets the backlog limit and a rate limit of 0
// (unlimited), registers this process as the audit daemon and starts reading
// records in a goroutine. It needs CAP_AUDIT_CONTROL in the initial user and
// pid namespaces, and fails if a healthy daemon (auditd) holds the slot.
func Start(opts Options) (_ *Collector, err error) {
	opts = opts.withDefaults()
	backlog, log := opts.BacklogLimit, opts.Log
	leave, err := joinQueue(opts.QueueWait, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			leave()
		}
	}()
	reader, ctl, conn, err := openSockets()
	if err != nil {
		return nil, err
	}
	var prev *libaudit.AuditStatus // set once the slot is ours
	defer func() {
		if err != nil {
			if prev != nil {
				restore(reader, prev) // put back what was changed before the failure
			}
			reader.Close()
			ctl.Close()
		}
	}()
	st, err := auditnl.Status(ctl, 0)
	if err != nil {
		return nil, fmt.Errorf("audit collector: get status: %w", err)
	}
	if st.Enabled == 2 {
		return nil, errors.New("audit collector: audit is locked (enabled=2); its backlog, rate limit and daemon cannot be set until reboot")
	}
	// Take the slot first, then change the settings: another collector that
	// is closing restores its settings before it lets the slot go.
	if err = takeSlot(reader, st.PID, opts.SlotWait, log); err != nil {
		return nil, err
	}
	if prev, err = auditnl.Status(ctl, 0); err != nil {
		prev = nil
		return nil, fmt.Errorf("audit collector: get status: %w", err)
	}
	if err := configure(reader, prev, backlog, opts.DropWhenFull); err != nil {
		return nil, err
	}
	c := &Collector{
		reader: reader, conn: conn, ctl: ctl, raw: opts.Raw, log: log,
		runs: map[*Run]bool{}, barriers: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}), prev: prev, leave: leave,
	}
	go c.loop()
	log.Debug("audit collector registered", "pid", os.Getpid(), "backlog_limit", backlog, "was_enabled", prev.Enabled)
	return c, nil
}

// openSockets opens the reader, which becomes the daemon's socket, and the
// control socket: status queries go on their own socket because, once
// registered, the reader's carries records, which a query there would skip
// and lose.
// The reader is in Go's poller (auditnl.Conn), so that the loop waits for
// records without waking.
func openSockets() (reader, ctl *libaudit.AuditClient, conn *auditnl.Conn, err error) {
	reader, conn, err = auditnl.NewClient()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("audit collector: open netlink socket: %w", err)
	}
	ctl, err = libaudit.NewAuditClient(nil)
	if err != nil {
		reader.Close()
		return nil, nil, nil, fmt.Errorf("audit collector: open control socket: %w", err)
	}
	return reader, ctl, conn, nil
}

// withDefaults is o with each zero field's default.
func (o Options) withDefaults() Options {
	if o.BacklogLimit == 0 {
		o.BacklogLimit = DefaultBacklogLimit
	}
	if o.SlotWait == 0 {
		o.SlotWait = DefaultSlotWait
	}
	if o.QueueWait == 0 {
		o.QueueWait = DefaultQueueWait
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// takeSlot registers reader's process as the audit daemon, waiting up to
// slotWait for the holder (pid) to let the slot go.
func takeSlot(reader *libaudit.AuditClient, holder uint32, slotWait time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(slotWait)
	for attempt := 0; ; attempt++ {
		err := reader.SetPID(libaudit.WaitForReply)
		if err == nil {
			return nil
		}
		switch {
		case errors.Is(err, syscall.ENOBUFS) && attempt < 3:
			// A congested socket answers ENOBUFS (elastic/beats#26031): drain and retry.
			for {
				if _, e := reader.Receive(true); e != nil {
					break
				}
			}
			continue
		case errors.Is(err, syscall.EEXIST) && time.Now().Before(deadline):
			if attempt == 0 {
				log.Info("waiting for the audit daemon slot", "holder", holder, "up_to", slotWait)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		case errors.Is(err, syscall.EEXIST):
			return fmt.Errorf("audit collector: register as audit daemon: another daemon (pid %d) held the slot for %v (stop auditd): %w", holder, slotWait, err)
		}
		return fmt.Errorf("audit collector: register as audit daemon: %w", err)
	}
}

// configure enables audit (if prev, the status found, had it off) and sets
// the backlog limit, a rate limit of 0 and, with dropWhenFull, a backlog
// wait time of 0.
func configure(reader *libaudit.AuditClient, prev *libaudit.AuditStatus, backlog uint32, dropWhenFull bool) error {
	if prev.Enabled == 0 {
		if err := reader.SetEnabled(true, libaudit.WaitForReply); err != nil {
			return fmt.Errorf("audit collector: enable audit: %w", err)
		}
	}
	if err := reader.SetBacklogLimit(backlog, libaudit.WaitForReply); err != nil {
		return fmt.Errorf("audit collector: set backlog limit %d: %w", backlog, err)
	}
	if err := reader.SetRateLimit(0, libaudit.WaitForReply); err != nil {
		return fmt.Errorf("audit collector: set rate limit 0: %w", err)
	}
	if dropWhenFull {
		if err := reader.SetBacklogWaitTime(0, libaudit.WaitForReply); err != nil {
			return fmt.Errorf("audit collector: set backlog wait time 0: %w", err)
		}
	}
	return nil
}

// restore puts back the enabled flag, backlog limit and rate limit of prev.
func restore(c *libaudit.AuditClient, prev *libaudit.AuditStatus) error {
	var err error
	if prev.Enabled == 0 {
		err = c.SetEnabled(false, libaudit.WaitForReply)
	}
	return errors.Join(err,
		c.SetBacklogLimit(prev.BacklogLimit, libaudit.WaitForReply),
		c.SetRateLimit(prev.RateLimit, libaudit.WaitForReply),
		c.SetBacklogWaitTime(int32(prev.BacklogWaitTime), libaudit.WaitForReply))
}

// loop reads records until Close. Receive waits in Go's poller, without
// waking while no record comes (a poll of the socket every 2 ms slowed the
// runs beside it under TCG); Close interrupts it with a read deadline.
func (c *Collector) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		msg, err := c.reader.Receive(false)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue // Close's interrupt: the stop above ends the loop
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ENOBUFS):
			c.problem("the audit socket overflowed (ENOBUFS): records were lost")
			continue
		case err != nil:
			c.mu.Lock()
			c.fatal = fmt.Errorf("audit collector: receive: %w", err)
			c.mu.Unlock()
			c.problem(fmt.Sprintf("receiving records failed: %v", err))
			return
		}
		if msg.Type < typeUser {
			continue // netlink acks and AUDIT_GET replies; no control calls are made on this socket
		}
		if len(msg.Data) >= libaudit.AuditMessageMaxLength {
			c.problem(fmt.Sprintf("a type %d record filled the %d-byte read buffer and may be truncated", msg.Type, libaudit.AuditMessageMaxLength))
		}
		rec, err := ParseNetlink(uint16(msg.Type), msg.Data)
		if c.raw != nil {
			fmt.Fprintf(c.raw, "%d %s\n", msg.Type, strings.TrimRight(string(msg.Data), "\x00\n"))
		}
		if err != nil {
			if t := Type(msg.Type); t == TypeLandlockAccess || t == TypeLandlockDomain || t == TypeSyscall {
				c.problem(fmt.Sprintf("undecodable record: %v", err))
			}
			continue
		}
		c.dispatch(rec)
	}
}

func (c *Collector) dispatch(rec Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received++
	if rec.Type == typeUser {
		// Only this process's own barriers count: the kernel writes the
		// sender's pid into the record, so another process with
		// CAP_AUDIT_WRITE cannot answer a Barrier before its message is
		// back, nor fill the map with tokens no Barrier takes out.
		if m, ok := rec.Raw("msg"); ok && strings.HasPrefix(m, barrierPrefix) {
			if pid, _ := rec.Raw("pid"); pid == strconv.Itoa(os.Getpid()) {
				c.barriers[m] = true
			}
			return
		}
	}
	switch rec.Type {
	case TypeLandlockAccess, TypeLandlockDomain, TypeSyscall:
		for r := range c.runs {
			r.records = append(r.records, rec)
		}
	}
}

func (c *Collector) problem(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for r := range c.runs {
		r.problems = append(r.problems, p)
	}
}

// Received returns the number of records read so far.
func (c *Collector) Received() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received
}

// Status queries the kernel's audit status on the control socket.
func (c *Collector) Status() (Status, error) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	st, err := auditnl.Status(c.ctl, 0)
	if err != nil {
		return Status{}, fmt.Errorf("audit status: %w", err)
	}
	return Status{Enabled: st.Enabled, PID: st.PID, RateLimit: st.RateLimit, BacklogLimit: st.BacklogLimit, Lost: st.Lost, Backlog: st.Backlog}, nil
}

const barrierPrefix = "lockstep-barrier "

// Barrier sends a user message through the kernel's audit queue and waits
// until the collector reads it back: every record queued before the call has
// then arrived.
func (c *Collector) Barrier(ctx context.Context) error {
	c.mu.Lock()
	c.nbar++
	token := barrierPrefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(c.nbar, 10)
	c.mu.Unlock()
	if err := c.sendUser(token); err != nil {
		return err
	}
	for {
		c.mu.Lock()
		seen, fatal := c.barriers[token], c.fatal
		delete(c.barriers, token)
		c.mu.Unlock()
		switch {
		case seen:
			return nil
		case fatal != nil:
			return fatal
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("audit barrier %q did not come back: %w", token, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (c *Collector) sendUser(text string) error {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	seq, err := c.ctl.Netlink.Send(syscall.NetlinkMessage{
		Header: syscall.NlMsghdr{Type: typeUser, Flags: syscall.NLM_F_REQUEST | syscall.NLM_F_ACK},
		Data:   append([]byte(text), 0),
	})
	if err != nil {
		return fmt.Errorf("audit barrier: send user message: %w", err)
	}
	for tries := 0; tries < 100; tries++ {
		msgs, err := c.ctl.Netlink.Receive(true, auditnl.ParseOne)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("audit barrier: read ack: %w", err)
		}
		m := msgs[0]
		if m.Header.Seq != seq || m.Header.Type != syscall.NLMSG_ERROR {
			continue
		}
		if err := libaudit.ParseNetlinkError(m.Data); err != nil {
			return fmt.Errorf("audit barrier: kernel refused the user message: %w", err)
		}
		return nil
	}
	return errors.New("audit barrier: no ack for the user message in 500ms")
}

// Close stops reading, puts back the enabled flag, backlog limit and rate
// limit that Start found (while still registered, so that a collector
// waiting for the slot never has its settings undone) and unregisters.
func (c *Collector) Close() error {
	select {
	case <-c.stop:
		return nil
	default:
	}
	close(c.stop)
	c.conn.SetReadDeadline(time.Now())
	<-c.done
	// restore waits for the kernel's replies on the reader again.
	c.conn.SetReadDeadline(time.Time{})
	// The next collector in line goes once the slot is free again.
	defer c.leave()
	// The loop has stopped: control calls on the reader are safe now.
	err := restore(c.reader, c.prev)
	err = errors.Join(err, c.reader.Close())
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if err = errors.Join(err, c.ctl.Close()); err != nil {
		return fmt.Errorf("audit collector: close: %w", err)
	}
	return nil
}

// Run is one observed run: every Landlock and SYSCALL record read between
// Begin and End.
type Run struct {
	c          *Collector
	lostBefore uint32
	records    []Record
	problems   []string
}

// Begin starts collecting a run. Call it before the run's first process
// starts.
func (c *Collector) Begin(ctx context.Context) (*Run, error) {
	// Records queued before the run belong to no one: let them through first.
	if err := c.Barrier(ctx); err != nil {
		return nil, err
	}
	st, err := c.Status()
	if err != nil {
		return nil, err
	}
	r := &Run{c: c, lostBefore: st.Lost}
	c.mu.Lock()
	c.runs[r] = true
	c.mu.Unlock()
	return r, nil
}

// RunResult is an assembled run plus the kernel's loss counters around it.
type RunResult struct {
	*Result
	// Records is every Landlock and SYSCALL record read during the run.
	Records []Record
	// LostBefore and LostAfter are the kernel's lost counter at Begin and
	// at End.
	LostBefore, LostAfter uint32
}

// End finishes a run after all of its processes have exited: it waits for
// every record queued so far (an in-band barrier), then up to wait for the
// deallocation record of each domain the run created (owns reports whether a
// pid belongs to the run's process tree), and compares the kernel's lost
// counter with Begin's. Any loss or missing barrier is a Problem.
func (r *Run) End(ctx context.Context, owns func(pid int) bool, wait time.Duration) (*RunResult, error) {
	defer func() {
		r.c.mu.Lock()
		delete(r.c.runs, r)
		r.c.mu.Unlock()
	}()
	if err := r.c.Barrier(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	var res *Result
	var recs []Record
	for {
		r.c.mu.Lock()
		recs = append([]Record(nil), r.records...)
		problems := append([]string(nil), r.problems...)
		r.c.mu.Unlock()
		res = Assemble(recs, owns)
		res.Problems = append(problems, res.Problems...)
		if len(res.Pending) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	if len(res.Pending) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("waited %v for the deallocation of %d domain(s)", wait, len(res.Pending)))
	}
	st, err := r.c.Status()
	if err != nil {
		return nil, err
	}
	if st.Lost != r.lostBefore {
		res.Problems = append(res.Problems, fmt.Sprintf("the kernel lost %d audit record(s) during the run (lost %d -> %d)", st.Lost-r.lostBefore, r.lostBefore, st.Lost))
	}
	return &RunResult{Result: res, Records: recs, LostBefore: r.lostBefore, LostAfter: st.Lost}, nil
}

// EnableWithoutDaemon enables audit with the collector's backlog and rate
// limits but registers no daemon, so that the kernel prints every record
// (the kmsg and dmesg forms). restore puts the previous settings back.
func EnableWithoutDaemon() (restore func() error, err error) {
	c, err := libaudit.NewAuditClient(nil)
	if err != nil {
		return nil, fmt.Errorf("audit: open netlink socket: %w", err)
	}
	st, err := auditnl.Status(c, 0)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("audit: get status: %w", err)
	}
	if st.PID != 0 {
		c.Close()
		return nil, fmt.Errorf("audit: pid %d is registered as the audit daemon; its records would not be printed", st.PID)
	}
	err = errors.Join(c.SetEnabled(true, libaudit.WaitForReply),
		c.SetBacklogLimit(DefaultBacklogLimit, libaudit.WaitForReply),
		c.SetRateLimit(0, libaudit.WaitForReply))
	restore = func() error {
		defer c.Close()
		var err error
		if st.Enabled == 0 {
			err = c.SetEnabled(false, libaudit.WaitForReply)
		}
		return errors.Join(err, c.SetBacklogLimit(st.BacklogLimit, libaudit.WaitForReply), c.SetRateLimit(st.RateLimit, libaudit.WaitForReply))
	}
	if err != nil {
		restore()
		return nil, fmt.Errorf("audit: enable: %w", err)
	}
	return restore, nil
}
