package proto

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Paths inside the guest, after the switch into the overlaid root.
const (
	// RunDir is the guest's private tmpfs directory for lockstep itself.
	RunDir = "/run/lockstep"
	// GuestBinary is where PID 1 copies itself, so that a job can run
	// lockstep's own verbs inside the guest.
	GuestBinary = "/run/lockstep/lockstep"
	// ResultsDir is the directory whose contents are shipped back to the
	// host as the results archive.
	ResultsDir = "/run/lockstep/results"
	// ShareDir is the parent of the read-only shares that have no explicit
	// guest path: the n-th share appears at ShareDir/<n>.
	ShareDir = "/run/lockstep/share"
	// JobFile is the job's path in the initramfs.
	JobFile = "/job.json"
	// OptionsFile is where PID 1 writes the job's Options before it
	// starts the command: a workload's guest side reads its typed options
	// there.
	OptionsFile = RunDir + "/options.json"
)

// Names both sides agree on.
const (
	// EventsPort is the virtio-serial port name of the event stream.
	EventsPort = "lockstep.events"
	// ResultsPort is the virtio-serial port name of the results frame.
	ResultsPort = "lockstep.results"
	// RootTag is the 9p mount tag of the guest's read-only root.
	RootTag = "lockstep.root"
	// CmdlineJob is the kernel parameter carrying the job ID.
	CmdlineJob = "lockstep.job"
	// CmdlineHook is the kernel parameter carrying a test hook name.
	CmdlineHook = "lockstep.hook"
	// EnvGuest is set to "1" in the environment of every guest command.
	EnvGuest = "LOCKSTEP_GUEST"
	// EnvAccel is the accelerator the guest runs under ("kvm" or "tcg"),
	// set by the host in every guest command's environment: a workload
	// whose runs are timed (the observer's, verify's) scales its time
	// limits under TCG, which is several times slower than the machine the
	// limits were measured on.
	EnvAccel = "LOCKSTEP_ACCEL"
	// EnvRole names the registered role the guest's lockstep binary
	// ([GuestBinary]) plays instead of parsing a command line: a workload's
	// guest side, which reads [OptionsFile]. It is the variable lockstep's
	// re-executed children are selected by too.
	EnvRole = "LOCKSTEP_ROLE"
	// StatusPrefix starts the console status line.
	StatusPrefix = "LOCKSTEP-STATUS "
	// ErrorPrefix starts the console line that carries the reason of a guest
	// setup failure (status [StatusSetupFailed]).
	ErrorPrefix = "LOCKSTEP-ERROR "
	// SignaledPrefix starts the console line PID 1 prints when the command
	// died by a signal: the command's CPU time and peak memory, the kernel's
	// OOM-kill count, the memory left and the last PID, at that moment.
	SignaledPrefix = "LOCKSTEP-JOB-SIGNALED "
	// ResultsAck is the byte the host writes back on the results port
	// once it has read the whole results frame. PID 1 waits for it before
	// it reboots: a reboot ends QEMU, which drops what it has taken from
	// the port but not yet written to the host's socket (a frame cut short
	// under load: "read results frame payload …: unexpected EOF").
	ResultsAck = 'A'
	// EventsAck is the byte the host writes back on the events port once
	// it has read the done event, for the same reason: the events port
	// drops its queued tail at the reboot too (an event line cut short
	// under a slow host reader: "event N: decode …: unexpected end of JSON
	// input").
	EventsAck = 'D'
)

// Test hooks: names accepted in [CmdlineHook]. They exist so the harness's
// failure paths are tested against a real guest, not a mock.
const (
	// HookHangBoot makes PID 1 sleep forever before its first event.
	HookHangBoot = "hang-boot"
	// HookHangJob makes PID 1 sleep forever after its first event, before
	// the job runs.
	HookHangJob = "hang-job"
	// HookPanic makes PID 1 exit, which panics the kernel.
	HookPanic = "panic"
	// HookSetupFail makes PID 1 report a setup failure (status 70).
	HookSetupFail = "setup-fail"
	// HookCorruptResults makes PID 1 flip one byte of the results frame's
	// payload after its checksum was taken, as a channel that corrupts
	// data would.
	HookCorruptResults = "corrupt-results"
)

// Statuses with a fixed meaning.
const (
	// StatusIndeterminate: nothing trustworthy came back from the guest.
	StatusIndeterminate = 3
	// StatusSetupFailed: the guest could not be set up; the job never ran.
	StatusSetupFailed = 70
)

// SchemaVersion is the version of [Job] and [Event].
const SchemaVersion = 1

// Job is what the host asks the guest to do; it travels as JobFile in the
// initramfs.
type Job struct {
	Schema int `json:"schema"`
	// ID identifies the boot; it must equal the kernel's lockstep.job=.
	ID string `json:"id"`
	// Command is the argv to run; Command[0] is looked up in PATH.
	Command []string `json:"command"`
	// Env is added to the command's environment (KEY=VALUE).
	Env []string `json:"env,omitempty"`
	// Dir is the command's working directory; "" means "/".
	Dir string `json:"dir,omitempty"`
	// Options, when set, are written to OptionsFile before the command
	// starts: the typed options of the role the command plays (EnvRole),
	// carried in the job rather than spelled as a command line.
	Options json.RawMessage `json:"options,omitempty"`
	// Root describes the root file system; nil means the initramfs stays
	// the root (used by the accel probe).
	Root *Root `json:"root,omitempty"`
	// Shares are extra read-only 9p mounts.
	Shares []Share `json:"shares,omitempty"`
	// Extra lists files the initramfs carries under /extra (strace and its
	// libraries, for a root without strace), each copied to the same path
	// in the new root unless the root has it already.
	Extra []string `json:"extra,omitempty"`
	// Modules are kernel modules in the initramfs, loaded in this order
	// before anything else (for distribution kernels).
	Modules []string `json:"modules,omitempty"`
	// Probe makes PID 1 skip the root and the job: it reports status 0 as
	// soon as it runs. The accel probe uses it.
	Probe bool `json:"probe,omitempty"`
	// Verbose makes PID 1 log each setup step on the console.
	Verbose bool `json:"verbose,omitempty"`
}

// Root is the guest's root file system: a read-only 9p export, or a
// read-only block device, with a tmpfs overlayfs upper on top, so writes
// stay in the guest.
type Root struct {
	// Tag is the 9p mount tag; unused when Device is set.
	Tag string `json:"tag,omitempty"`
	// Msize is the 9p msize option (bytes); 0 is 512000.
	Msize int `json:"msize,omitempty"`
	// Device is a block device holding the root (e.g. /dev/vda), mounted
	// read-only with FSType instead of the 9p export.
	Device string `json:"device,omitempty"`
	// FSType is Device's file system type; "" is "ext4".
	FSType string `json:"fstype,omitempty"`
}

// Share is one extra read-only 9p mount.
type Share struct {
	// Tag is the 9p mount tag.
	Tag string `json:"tag"`
	// Path is the guest mount point; "" is ShareDir/<index>.
	Path string `json:"path,omitempty"`
	// Msize is the 9p msize option (bytes); 0 is 512000.
	Msize int `json:"msize,omitempty"`
}

// Event types.
const (
	// EventHello is the guest's first event: PID 1 is up and the channel
	// works. Its arrival ends the boot phase.
	EventHello = "hello"
	// EventStdout and EventStderr carry a chunk of the command's output.
	EventStdout = "stdout"
	EventStderr = "stderr"
	// EventLog is a line of PID 1's own log.
	EventLog = "log"
	// EventStart says the command has been started.
	EventStart = "start"
	// EventExit carries the command's status.
	EventExit = "exit"
	// EventError carries a guest-side failure's reason.
	EventError = "error"
	// EventDone is the last event.
	EventDone = "done"
)

// Event is one JSON line on the events port.
type Event struct {
	Seq  uint64 `json:"seq"`
	Type string `json:"type"`
	// Data is the output chunk of stdout/stderr events.
	Data []byte `json:"data,omitempty"`
	// Msg is the text of log and error events, and the kernel release in
	// hello.
	Msg string `json:"msg,omitempty"`
	// Status is set on exit events.
	Status *int `json:"status,omitempty"`
	// UptimeMS is the guest's uptime when the event was made.
	UptimeMS int64 `json:"uptime_ms,omitempty"`
	// Done is set on the done event only.
	Done *Done `json:"done,omitempty"`
}

// Done is the final event's payload: what the guest sent, so the host can
// check it received all of it.
type Done struct {
	// Events is the number of events before this one.
	Events uint64 `json:"events"`
	// StdoutBytes and StderrBytes count the output bytes sent.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// Status is the command's status (the same as on the console).
	Status int `json:"status"`
	// ResultsSHA256 is the hex SHA-256 of the results frame's payload, and
	// ResultsBytes its length; "" and 0 when no frame was sent.
	ResultsSHA256 string `json:"results_sha256"`
	ResultsBytes  int64  `json:"results_bytes"`
}

// EventWriter numbers and writes events as JSON lines. It is not safe for
// concurrent use.
type EventWriter struct {
	w      io.Writer
	seq    uint64
	stdout int64
	stderr int64
}

// NewEventWriter returns a writer that starts at seq 0.
func NewEventWriter(w io.Writer) *EventWriter { return &EventWriter{w: w} }

// Write stamps e with the next sequence number and writes it as one line.
func (ew *EventWriter) Write(e Event) error {
	e.Seq = ew.seq
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	b = append(b, '\n')
	if _, err := ew.w.Write(b); err != nil {
		return fmt.Errorf("write %s event %d: %w", e.Type, e.Seq, err)
	}
	ew.seq++
	switch e.Type {
	case EventStdout:
		ew.stdout += int64(len(e.Data))
	case EventStderr:
		ew.stderr += int64(len(e.Data))
	}
	return nil
}

// Done writes the final event with the counts so far.
func (ew *EventWriter) Done(status int, resultsSHA256 string, resultsBytes int64) error {
	return ew.Write(Event{Type: EventDone, Done: &Done{
		Events: ew.seq, StdoutBytes: ew.stdout, StderrBytes: ew.stderr,
		Status: status, ResultsSHA256: resultsSHA256, ResultsBytes: resultsBytes,
	}})
}

// Errors of the event stream; each makes a run indeterminate.
var (
	ErrSeqGap      = errors.New("event sequence gap")
	ErrMissingDone = errors.New("event stream ended without a done event")
	ErrAfterDone   = errors.New("event after done")
	ErrBadCounts   = errors.New("done event counts differ from what was received")
)

// MaxEventLine bounds one JSON line on the events port.
const MaxEventLine = 4 << 20

// EventReader reads and checks events: JSON lines, contiguous seq from 0, a
// done event last whose counts match what was read.
type EventReader struct {
	sc     *bufio.Scanner
	next   uint64
	stdout int64
	stderr int64
	done   *Done
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxEventLine)
	return &EventReader{sc: sc}
}

// Next returns the next event. At the end of the stream it returns io.EOF if
// a done event was read and its counts match, or an error wrapping
// ErrMissingDone otherwise.
func (er *EventReader) Next() (Event, error) {
	for er.sc.Scan() {
		line := bytes.TrimSpace(er.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return Event{}, fmt.Errorf("event %d: decode %q: %w", er.next, truncate(line, 80), err)
		}
		if er.done != nil {
			return Event{}, fmt.Errorf("%w: seq %d type %q", ErrAfterDone, e.Seq, e.Type)
		}
		if e.Seq != er.next {
			return Event{}, fmt.Errorf("%w: got seq %d, wanted %d", ErrSeqGap, e.Seq, er.next)
		}
		er.next++
		switch e.Type {
		case EventStdout:
			er.stdout += int64(len(e.Data))
		case EventStderr:
			er.stderr += int64(len(e.Data))
		case EventDone:
			if e.Done == nil {
				return Event{}, fmt.Errorf("done event %d has no counts", e.Seq)
			}
			d := *e.Done
			if d.Events != e.Seq || d.StdoutBytes != er.stdout || d.StderrBytes != er.stderr {
				return Event{}, fmt.Errorf("%w: guest sent %d events, %d stdout and %d stderr bytes; received %d, %d and %d",
					ErrBadCounts, d.Events, d.StdoutBytes, d.StderrBytes, e.Seq, er.stdout, er.stderr)
			}
			er.done = &d
		}
		return e, nil
	}
	if err := er.sc.Err(); err != nil {
		return Event{}, fmt.Errorf("read event %d: %w", er.next, err)
	}
	if er.done == nil {
		return Event{}, fmt.Errorf("%w (%d events read)", ErrMissingDone, er.next)
	}
	return Event{}, io.EOF
}

// Done returns the done event's payload, or nil if none was read yet.
func (er *EventReader) Done() *Done { return er.done }

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// FrameMagic starts the results frame.
var FrameMagic = [8]byte{'L', 'S', 'R', 'E', 'S', 'v', '1', '\n'}

// FrameHeaderSize is the size of magic, length and SHA-256.
const FrameHeaderSize = 8 + 8 + sha256.Size

// Errors of the results frame.
var (
	ErrBadMagic    = errors.New("results frame: bad magic")
	ErrBadChecksum = errors.New("results frame: checksum mismatch")
	ErrTooLarge    = errors.New("results frame: payload too large")
)

// WriteFrame writes payload as one frame and returns its hex SHA-256.
func WriteFrame(w io.Writer, payload []byte) (string, error) {
	sum := sha256.Sum256(payload)
	hdr := make([]byte, 0, FrameHeaderSize)
	hdr = append(hdr, FrameMagic[:]...)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(payload)))
	hdr = append(hdr, sum[:]...)
	if _, err := w.Write(hdr); err != nil {
		return "", fmt.Errorf("write results frame header: %w", err)
	}
	if _, err := w.Write(payload); err != nil {
		return "", fmt.Errorf("write results frame payload (%d bytes): %w", len(payload), err)
	}
	return hex.EncodeToString(sum[:]), nil
}

// ReadFrame reads one frame of at most max payload bytes and checks its
// checksum. It returns the payload and its hex SHA-256.
func ReadFrame(r io.Reader, max int64) ([]byte, string, error) {
	var hdr [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, "", fmt.Errorf("read results frame header: %w", err)
	}
	if !bytes.Equal(hdr[:8], FrameMagic[:]) {
		return nil, "", fmt.Errorf("%w: got %q, wanted %q", ErrBadMagic, hdr[:8], FrameMagic[:])
	}
	n := binary.BigEndian.Uint64(hdr[8:16])
	if n > uint64(max) {
		return nil, "", fmt.Errorf("%w: %d bytes, at most %d wanted", ErrTooLarge, n, max)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, "", fmt.Errorf("read results frame payload (%d bytes): %w", n, err)
	}
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], hdr[16:]) {
		return nil, "", fmt.Errorf("%w: header says %x, payload is %x", ErrBadChecksum, hdr[16:], sum[:])
	}
	return payload, hex.EncodeToString(sum[:]), nil
}

// StatusLine returns the console line that reports status n.
func StatusLine(n int) string { return StatusPrefix + strconv.Itoa(n) }

// ParseStatus returns the status of the last "LOCKSTEP-STATUS <n>" on the
// console: the last match anywhere on a line (kernel messages may share the
// line), '\r' stripped, n a decimal number from 0 to 255. ok is false when
// there is no such line.
func ParseStatus(console []byte) (status int, ok bool) {
	prefix := []byte(StatusPrefix)
	for len(console) > 0 {
		var line []byte
		i := bytes.LastIndexByte(console, '\n')
		if i < 0 {
			line, console = console, nil
		} else {
			line, console = console[i+1:], console[:i]
		}
		line = bytes.ReplaceAll(line, []byte{'\r'}, nil)
		for len(line) > 0 {
			j := bytes.LastIndex(line, prefix)
			if j < 0 {
				break
			}
			if n, ok := leadingStatus(line[j+len(prefix):]); ok {
				return n, true
			}
			line = line[:j]
		}
	}
	return 0, false
}

// leadingStatus parses the decimal number that b starts with, which must end
// b or be followed by a space.
func leadingStatus(b []byte) (int, bool) {
	k := 0
	for k < len(b) && b[k] >= '0' && b[k] <= '9' {
		k++
	}
	if k == 0 || k > 3 || (k < len(b) && b[k] != ' ' && b[k] != '\t') {
		return 0, false
	}
	n, err := strconv.Atoi(string(b[:k]))
	if err != nil || n > 255 {
		return 0, false
	}
	return n, true
}

// ParseSetupError returns the reason on the last "LOCKSTEP-ERROR" console
// line, or "".
func ParseSetupError(console []byte) string {
	prefix := []byte(ErrorPrefix)
	j := bytes.LastIndex(console, prefix)
	if j < 0 {
		return ""
	}
	rest := console[j+len(prefix):]
	if k := bytes.IndexByte(rest, '\n'); k >= 0 {
		rest = rest[:k]
	}
	return string(bytes.TrimSpace(bytes.ReplaceAll(rest, []byte{'\r'}, nil)))
}

// ReadOptions decodes the job's options ([OptionsFile], as PID 1 wrote
// them) into v, refusing a field v does not have: the two ends of a
// workload are one binary, so an unknown field is a defect, not a newer
// host.
func ReadOptions(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the job's options: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("decode the job's options %s: %w", path, err)
	}
	return nil
}
