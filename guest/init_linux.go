package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"golang.org/x/sys/unix"
)

// guestPath is the PATH of every guest command.
const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Main is PID 1: it sets the guest up, runs the job, ships the results,
// prints the status line and reboots (with QEMU's -no-reboot, QEMU exits).
// It never returns.
func Main() {
	p := &pid1{sys: realSys{}, console: os.Stdout}
	status := p.run()
	p.finish(status)
}

// pid1 is the guest init's state.
type pid1 struct {
	sys     syscaller
	console *os.File
	cmdline map[string]string
	job     *proto.Job
	verbose bool

	mu      sync.Mutex // guards events
	events  *proto.EventWriter
	evFile  *os.File
	resFile *os.File
	rooted  bool // the new root is in place: results can be packed
}

// setupError is a failure before the job ran: status 70.
type setupError struct{ err error }

func (e setupError) Error() string { return e.err.Error() }
func (e setupError) Unwrap() error { return e.err }

func setupf(format string, a ...any) error { return setupError{fmt.Errorf(format, a...)} }

// run does everything up to the job's status; a setup failure is reported
// on the console and the event stream and becomes status 70.
func (p *pid1) run() (status int) {
	defer func() {
		if r := recover(); r != nil {
			p.fail(fmt.Errorf("guest init panicked: %v", r))
			status = proto.StatusSetupFailed
		}
	}()
	if err := p.setup(); err != nil {
		p.fail(err)
		return proto.StatusSetupFailed
	}
	if p.job.Probe {
		return 0
	}
	return p.runJob()
}

// setup readies the guest for the job: the early mounts, the job itself and
// its modules, then (unless the job is a probe) the event and results
// ports, the hello, loopback, the hostname and the job's root.
func (p *pid1) setup() error {
	if err := p.bootstrap(); err != nil {
		return err
	}
	if p.job.Probe {
		return nil
	}
	if err := p.openPorts(); err != nil {
		return setupf("%w", err)
	}
	p.send(proto.Event{Type: proto.EventHello, Msg: kernelRelease()})
	switch p.cmdline[proto.CmdlineHook] {
	case proto.HookHangJob:
		hang()
	case proto.HookSetupFail:
		return setupf("test hook %s", proto.HookSetupFail)
	}
	if err := p.sys.LoopbackUp(); err != nil {
		return setupf("bring loopback up: %w", err)
	}
	p.sys.Sethostname("lockstep")
	if p.job.Root == nil {
		return nil
	}
	return p.enterRoot()
}

// bootstrap mounts what PID 1 needs first, takes the console, reads the
// kernel command line (obeying a boot hook) and the job, and loads the
// job's modules.
func (p *pid1) bootstrap() error {
	if err := earlyMounts(p.sys); err != nil {
		return setupf("early mounts: %w", err)
	}
	if f, err := os.OpenFile("/dev/console", os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		unix.Dup3(int(f.Fd()), 1, 0)
		unix.Dup3(int(f.Fd()), 2, 0)
		p.console = f
	}
	cl, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return setupf("read kernel command line: %w", err)
	}
	p.cmdline = parseCmdline(string(cl))
	switch p.cmdline[proto.CmdlineHook] {
	case proto.HookHangBoot:
		hang()
	case proto.HookPanic:
		os.Exit(1) // PID 1 exiting panics the kernel
	}
	job, err := readJob(proto.JobFile, p.cmdline[proto.CmdlineJob])
	if err != nil {
		return setupf("%w", err)
	}
	p.job = job
	p.verbose = job.Verbose
	if err := loadModules(job.Modules); err != nil {
		return setupf("%w", err)
	}
	return nil
}

// enterRoot switches to the job's root under a tmpfs overlay.
func (p *pid1) enterRoot() error {
	self, err := os.Executable()
	if err != nil {
		self = "/init"
	}
	if err := switchRoot(p.sys, p.job, self); err != nil {
		return setupf("%w", err)
	}
	p.rooted = true
	if p.job.Root.Device != "" {
		p.logf("root switched to %s under a tmpfs overlay", p.job.Root.Device)
	} else {
		p.logf("root switched to 9p tag %s under a tmpfs overlay", p.job.Root.Tag)
	}
	if err := writeOptions(proto.OptionsFile, p.job.Options); err != nil {
		return setupf("%w", err)
	}
	return nil
}

func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// parseCmdline splits the kernel command line into key=value pairs (a key
// without a value maps to "").
func parseCmdline(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// readJob reads the job and checks it belongs to this boot.
func readJob(file, wantID string) (*proto.Job, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read job: %w", err)
	}
	var j proto.Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("decode job %s: %w", file, err)
	}
	if j.Schema != proto.SchemaVersion {
		return nil, fmt.Errorf("job schema %d: want %d", j.Schema, proto.SchemaVersion)
	}
	if wantID == "" || j.ID != wantID {
		return nil, fmt.Errorf("job ID %q does not match the kernel's %s=%q", j.ID, proto.CmdlineJob, wantID)
	}
	if !j.Probe && len(j.Command) == 0 {
		return nil, errors.New("job has no command")
	}
	return &j, nil
}

// writeOptions puts the job's options where the role it runs reads them
// (proto.ReadOptions); a job without options writes nothing.
func writeOptions(path string, opts json.RawMessage) error {
	if len(opts) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("the job's options: %w", err)
	}
	if err := os.WriteFile(path, opts, 0o644); err != nil {
		return fmt.Errorf("the job's options: %w", err)
	}
	return nil
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// openPorts finds the virtio-serial ports by name in sysfs (there is no
// udev to make /dev/virtio-ports links) and opens them.
func (p *pid1) openPorts() error {
	want := map[string]**os.File{proto.EventsPort: &p.evFile, proto.ResultsPort: &p.resFile}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ports, _ := proto.Ports()
		for name, dev := range ports {
			f, ok := want[name]
			if !ok || *f != nil {
				continue
			}
			// Both ports are read too: the host's acknowledgements.
			var err error
			if *f, err = os.OpenFile(dev, os.O_RDWR, 0); err != nil {
				return fmt.Errorf("open virtio port %s: %w", dev, err)
			}
		}
		if p.evFile != nil && p.resFile != nil {
			p.events = proto.NewEventWriter(p.evFile)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("virtio-serial ports %s and %s not found in %s (found %d ports)",
				proto.EventsPort, proto.ResultsPort, proto.PortClass, len(ports))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// send writes one event; a broken channel is noted on the console (the
// host will see the gap or the missing done).
func (p *pid1) send(e proto.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.events == nil {
		return
	}
	e.UptimeMS = uptimeMS()
	if err := p.events.Write(e); err != nil {
		fmt.Fprintf(p.console, "lockstep-guest: %v\n", err)
		p.events = nil
	}
}

func uptimeMS() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return ts.Nano() / 1e6
}

func (p *pid1) logf(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if p.verbose {
		fmt.Fprintf(p.console, "lockstep-guest: %s\n", msg)
	}
	p.send(proto.Event{Type: proto.EventLog, Msg: msg})
}

// fail reports a setup failure on the console and the event stream.
func (p *pid1) fail(err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	fmt.Fprintf(p.console, "\n%s%s\n", proto.ErrorPrefix, msg)
	p.send(proto.Event{Type: proto.EventError, Msg: msg})
}

// runJob runs the command with its output streamed as events and returns
// its status (128+n for a signal, 127 not found, 126 not executable).
func (p *pid1) runJob() int {
	j := p.job
	os.Setenv("PATH", guestPath)
	cmd := exec.Command(j.Command[0], j.Command[1:]...)
	cmd.Env = append([]string{"PATH=" + guestPath, "HOME=/root", "TERM=dumb", "USER=root", proto.EnvGuest + "=1"}, j.Env...)
	cmd.Dir = p.jobDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.fail(err)
		return proto.StatusSetupFailed
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.fail(err)
		return proto.StatusSetupFailed
	}
	if err := cmd.Start(); err != nil {
		status := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			status = 127
		}
		p.send(proto.Event{Type: proto.EventStderr, Data: []byte(fmt.Sprintf("lockstep-guest: %v\n", err))})
		p.send(proto.Event{Type: proto.EventExit, Status: &status})
		return status
	}
	p.send(proto.Event{Type: proto.EventStart, Msg: strings.Join(j.Command, " ")})
	stopReaping := make(chan struct{})
	defer close(stopReaping)
	go reapOrphans(cmd.Process.Pid, stopReaping)
	var wg sync.WaitGroup
	wg.Add(2)
	go p.stream(&wg, stdout, proto.EventStdout)
	go p.stream(&wg, stderr, proto.EventStderr)
	// Reap the command itself; its pipes close when every holder is gone.
	state, werr := cmd.Process.Wait()
	if werr == nil {
		if ws := state.Sys().(syscall.WaitStatus); ws.Signaled() {
			ru, _ := state.SysUsage().(*syscall.Rusage)
			fmt.Fprintf(p.console, "\n%s\n", witness(cmd.Process.Pid, ws.Signal(), ru))
		}
	}
	// Whatever the command left behind dies with it, so the pipes reach
	// EOF and nothing runs past the status line.
	unix.Kill(-1, unix.SIGKILL)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.logf("output pipes still open 10 s after the command exited")
	}
	status := proto.StatusIndeterminate
	if werr == nil {
		status = exitStatus(state.Sys().(syscall.WaitStatus), status)
	}
	p.send(proto.Event{Type: proto.EventExit, Status: &status})
	return status
}

// jobDir is the job's working directory, or / when the guest root lacks it.
func (p *pid1) jobDir() string {
	dir := p.job.Dir
	if dir == "" {
		dir = "/"
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		p.logf("working directory %s is not in the guest root; using /", dir)
		dir = "/"
	}
	return dir
}

// stream sends what r yields as events of type typ until it ends.
func (p *pid1) stream(wg *sync.WaitGroup, r io.Reader, typ string) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.send(proto.Event{Type: typ, Data: bytes.Clone(buf[:n])})
		}
		if err != nil {
			return
		}
	}
}

// exitStatus is the status of an exit (128+n for signal n), otherwise
// status as given.
func exitStatus(ws syscall.WaitStatus, status int) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return status
}

// finish ships the results, sends done, prints the status line, syncs and
// reboots. It never returns.
func (p *pid1) finish(status int) {
	if p.resFile != nil {
		var payload []byte
		if p.rooted {
			b, err := PackResults(proto.ResultsDir)
			if err != nil {
				p.fail(err)
				status = proto.StatusIndeterminate
			} else {
				payload = b
			}
		}
		var frame io.Writer = p.resFile
		if p.cmdline[proto.CmdlineHook] == proto.HookCorruptResults {
			frame = &flipWriter{w: frame, at: proto.FrameHeaderSize}
		}
		sum, err := proto.WriteFrame(frame, payload)
		if err != nil {
			fmt.Fprintf(p.console, "lockstep-guest: %v\n", err)
		} else {
			p.awaitAck(p.resFile, proto.ResultsAck, "the results frame")
		}
		p.mu.Lock()
		if p.events != nil {
			if err := p.events.Done(status, sum, int64(len(payload))); err != nil {
				fmt.Fprintf(p.console, "lockstep-guest: %v\n", err)
			} else {
				p.awaitAck(p.evFile, proto.EventsAck, "the done event")
			}
		}
		p.mu.Unlock()
	}
	fmt.Fprintf(p.console, "\n%s\n", proto.StatusLine(status))
	// Wait until the UART has sent the line: a reboot does not drain it.
	unix.IoctlSetInt(int(p.console.Fd()), unix.TCSBRK, 1)
	unix.Sync()
	for {
		// reboot=t on the command line makes this a triple fault, and
		// -no-reboot makes QEMU exit.
		unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
		time.Sleep(time.Second)
	}
}

// ackWait bounds each of PID 1's waits for an acknowledgement by the host:
// past it the run ends as it would have without one (the host then names
// what it missed: a frame cut short, an event stream without its end).
const ackWait = 30 * time.Second

// awaitAck waits until the host writes want back on port, its word that it
// has read everything PID 1 wrote there up to what (proto.ResultsAck,
// proto.EventsAck), so that the reboot cannot drop a queued tail.
func (p *pid1) awaitAck(port *os.File, want byte, what string) {
	got := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := io.ReadFull(port, b)
		if err == nil && b[0] != want {
			err = fmt.Errorf("got %q, want %q", b[0], want)
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			fmt.Fprintf(p.console, "lockstep-guest: the host's acknowledgement of %s: %v\n", what, err)
		}
	case <-time.After(ackWait):
		fmt.Fprintf(p.console, "lockstep-guest: no acknowledgement of %s in %v\n", what, ackWait)
	}
}

// flipWriter flips the byte at offset at of what passes through it
// (proto.HookCorruptResults).
type flipWriter struct {
	w   io.Writer
	at  int64
	off int64
}

func (f *flipWriter) Write(b []byte) (int, error) {
	if i := f.at - f.off; i >= 0 && i < int64(len(b)) {
		b = bytes.Clone(b)
		b[i] ^= 0xff
	}
	n, err := f.w.Write(b)
	f.off += int64(n)
	return n, err
}

// loadModules loads kernel modules from the initramfs in order; one that is
// already loaded (or built in) is fine.
func loadModules(paths []string) error {
	for _, m := range paths {
		f, err := os.Open(m)
		if err != nil {
			return fmt.Errorf("load module %s: %w", m, err)
		}
		flags := 0
		if strings.HasSuffix(m, ".xz") || strings.HasSuffix(m, ".zst") {
			flags = unix.MODULE_INIT_COMPRESSED_FILE
		}
		err = unix.FinitModule(int(f.Fd()), "", flags)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load module %s: %w", m, err)
		}
	}
	return nil
}
