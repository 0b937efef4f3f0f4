//go:build linux

package proof

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"golang.org/x/sys/unix"
)

// specFS is a capture scenario Landlock denies with EACCES in a ruleset
// handling the filesystem rights right.
func specFS(right uint64, nr uintptr, act func(fixture) unix.Errno) spec {
	sp := denied(nr, act)
	sp.attr = ll.RulesetAttr{HandledAccessFS: right}
	return sp
}

// Capture scenarios: refusals beyond the proof's that make the record forms
// the parser must meet (hex and " (deleted)" paths, a rename's records,
// network records with lport, an autobind without a port, two blockers, an
// abstract socket's hex name). Their records are kept as test data; they are
// not checks.
var captureSpecs = map[string]spec{
	"capture.hex_path": specFS(ll.AccessFSReadFile, unix.SYS_OPENAT, func(fx fixture) unix.Errno {
		return openat(fx.spaced, unix.O_RDONLY, 0)
	}),
	"capture.deleted": specFS(ll.AccessFSTruncate, unix.SYS_FTRUNCATE, func(fx fixture) unix.Errno {
		fd, err := unix.Open(fx.gone, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err.(unix.Errno)
		}
		if err := unix.Unlink(fx.gone); err != nil {
			return err.(unix.Errno)
		}
		_, _, e := unix.Syscall(unix.SYS_FTRUNCATE, uintptr(fd), 0, 0)
		return e
	}),
	"capture.rename_two": {
		attr: ll.RulesetAttr{HandledAccessFS: ll.AccessFSRefer},
		nr:   unix.SYS_RENAMEAT, want: unix.EXDEV,
		act: func(fx fixture) unix.Errno {
			o, n := cstr(fx.moved2), cstr(filepath.Join(fx.dst, "moved2"))
			_, _, e := unix.Syscall6(unix.SYS_RENAMEAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(o)), uintptr(atFDCWD), uintptr(unsafe.Pointer(n)), 0, 0)
			runtime.KeepAlive(o)
			runtime.KeepAlive(n)
			return e
		},
	},
	"capture.rw_both": specFS(ll.AccessFSReadFile|ll.AccessFSWriteFile, unix.SYS_OPENAT, func(fx fixture) unix.Errno {
		return openat(fx.file, unix.O_RDWR, 0)
	}),
	"capture.tcp_lport": lportSpec(unix.SOCK_STREAM, ll.AccessNetBindTCP, ll.AccessNetConnectTCP),
	"capture.udp_lport": lportSpec(unix.SOCK_DGRAM, ll.AccessNetBindUDP, ll.AccessNetConnectSendUDP),
	"capture.udp_autobind": {
		attr: ll.RulesetAttr{HandledAccessNet: ll.AccessNetBindUDP | ll.AccessNetConnectSendUDP},
		grant: func(fd int, fx fixture) error {
			return ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectSendUDP, Port: uint64(fx.port + 1000)}, 0)
		},
		nr: unix.SYS_SENDTO, want: unix.EACCES,
		act: func(fx fixture) unix.Errno {
			s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err.(unix.Errno)
			}
			defer unix.Close(s)
			sa := inet4(fx.port + 1000)
			msg := []byte("x")
			_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s), uintptr(unsafe.Pointer(&msg[0])), 1, 0, uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
			runtime.KeepAlive(&sa)
			return e
		},
	},
	"capture.abstract_unix": {
		attr: ll.RulesetAttr{Scoped: ll.ScopeAbstractUnixSocket},
		nr:   unix.SYS_CONNECT, want: unix.EPERM,
		act: func(fx fixture) unix.Errno {
			s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err.(unix.Errno)
			}
			defer unix.Close(s)
			var sa unix.RawSockaddrUnix
			sa.Family = unix.AF_UNIX
			name := abstractName(fx.port)
			for i := 0; i < len(name); i++ {
				sa.Path[i+1] = int8(name[i])
			}
			_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), uintptr(unsafe.Pointer(&sa)), uintptr(2+1+len(name)))
			runtime.KeepAlive(&sa)
			return e
		},
	},
}

// captureABI is the ABI each capture scenario needs.
var captureABI = map[string]int{
	"capture.hex_path": landlock.ABIFirst, "capture.deleted": landlock.ABITruncate, "capture.rename_two": landlock.ABIRefer,
	"capture.rw_both": landlock.ABIFirst, "capture.tcp_lport": landlock.ABINetwork, "capture.udp_lport": landlock.ABIUDP,
	"capture.udp_autobind": landlock.ABIUDP, "capture.abstract_unix": landlock.ABIScope,
}

func init() {
	for name, sp := range captureSpecs {
		specs[name] = sp
	}
}

func abstractName(port int) string { return "lockstep-proof-" + strconv.Itoa(port) }

func inet4(port int) unix.RawSockaddrInet4 {
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	sa.Port = uint16(port>>8) | uint16(port&0xff)<<8
	return sa
}

// lportSpec binds a socket to the granted port, then connects to another:
// the connect's record names the bound port (lport) and the asked one
// (dest).
func lportSpec(typ int, bind, connect uint64) spec {
	return spec{
		attr: ll.RulesetAttr{HandledAccessNet: bind | connect},
		grant: func(fd int, fx fixture) error {
			return ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: bind, Port: uint64(fx.port)}, 0)
		},
		nr: unix.SYS_CONNECT, want: unix.EACCES,
		act: func(fx fixture) unix.Errno {
			s, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err.(unix.Errno)
			}
			defer unix.Close(s)
			sa := inet4(fx.port)
			if _, _, e := unix.Syscall(unix.SYS_BIND, uintptr(s), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa)); e != 0 {
				return e
			}
			da := inet4(fx.port + 1000)
			_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), uintptr(unsafe.Pointer(&da)), unsafe.Sizeof(da))
			runtime.KeepAlive(&sa)
			runtime.KeepAlive(&da)
			return e
		},
	}
}

// CaptureOptions configures Capture.
type CaptureOptions struct {
	// Out is the directory that receives netlink.txt, kmsg.txt, dmesg.txt
	// and cases.txt.
	Out string
	// Exe, Dir, PortBase and Wait as in Options.
	Exe, Dir string
	PortBase int
	Wait     time.Duration
}

// Capture makes every refusal of the proof and every capture scenario the
// kernel's ABI offers twice: first as the registered audit daemon, keeping
// each record as the netlink body ("<type> <body>" lines in netlink.txt),
// then with audit enabled and no daemon, so that the kernel prints the
// records, keeping the /dev/kmsg records (kmsg.txt) and the output of
// dmesg(1) (dmesg.txt). cases.txt names each scenario's child pid and the
// errno it got. It needs root and changes the audit and printk settings
// for its duration (restored afterwards); run it on a disposable machine.
func Capture(ctx context.Context, opts CaptureOptions) error {
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.PortBase == 0 {
		opts.PortBase = 47100
	}
	exe, names, cases, err := prepareCapture(opts)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	defer cases.Close()

	// Pass 1: netlink, as the registered daemon.
	raw, err := os.Create(filepath.Join(opts.Out, "netlink.txt"))
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	defer raw.Close()
	coll, err := audit.Start(audit.Options{Raw: raw})
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	err = capturePass(ctx, "netlink", names, exe, opts, cases, func(ctx context.Context, run func() int) error {
		r, err := coll.Begin(ctx)
		if err != nil {
			return err
		}
		pid := run()
		res, err := r.End(ctx, func(p int) bool { return p == pid }, opts.Wait)
		if err != nil {
			return err
		}
		if res.Indeterminate() {
			fmt.Fprintf(cases, "#   indeterminate: %s\n", strings.Join(res.Problems, "; "))
		}
		return nil
	})
	if cerr := coll.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("capture netlink: %w", err)
	}
	return capturePrintk(ctx, names, exe, opts, cases)
}

// prepareCapture resolves the binary the scenario children run, creates
// opts.Out and its cases.txt, and lists the scenarios this kernel offers.
func prepareCapture(opts CaptureOptions) (exe string, names []string, cases *os.File, err error) {
	exe = opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return "", nil, nil, err
		}
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", nil, nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return "", nil, nil, err
	}
	if names, err = scenarioNames(); err != nil {
		return "", nil, nil, err
	}
	if cases, err = os.Create(filepath.Join(opts.Out, "cases.txt")); err != nil {
		return "", nil, nil, err
	}
	return exe, names, cases, nil
}

// RunScenarios runs every refusal and capture scenario the kernel's ABI
// offers, each in its own child, without reading any record: for capturing
// what another audit daemon (auditd) writes. cases.txt in opts.Out names
// each child as pass "auditd".
func RunScenarios(ctx context.Context, opts CaptureOptions) error {
	if opts.PortBase == 0 {
		opts.PortBase = 47100
	}
	exe, names, cases, err := prepareCapture(opts)
	if err != nil {
		return fmt.Errorf("scenarios: %w", err)
	}
	defer cases.Close()
	err = capturePass(ctx, "auditd", names, exe, opts, cases, func(ctx context.Context, run func() int) error {
		run()
		return nil
	})
	// Let the last domains' deallocation records reach the daemon.
	time.Sleep(time.Second)
	return err
}

func scenarioNames() ([]string, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < landlock.ABIAuditRecords {
		return nil, fmt.Errorf("capture: Landlock ABI %d (%v): audit records need ABI %d", abi, err, landlock.ABIAuditRecords)
	}
	var names []string
	for _, r := range Refusals {
		if r.ABI() <= abi {
			names = append(names, r.Name)
		}
	}
	for _, n := range sortedKeys(captureABI) {
		if captureABI[n] <= abi {
			names = append(names, n)
		}
	}
	return names, nil
}

// capturePass runs each named scenario in its own child through around,
// which brackets the child's run (run returns its pid).
func capturePass(ctx context.Context, pass string, names []string, exe string, opts CaptureOptions, cases io.Writer,
	around func(ctx context.Context, run func() int) error) error {
	for i, name := range names {
		if err := captureOne(ctx, pass, name, i, exe, opts, cases, around); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// captureOne runs one scenario in a fixture directory that is removed on
// every path out.
func captureOne(ctx context.Context, pass, name string, i int, exe string, opts CaptureOptions, cases io.Writer,
	around func(ctx context.Context, run func() int) error) error {
	dir, err := os.MkdirTemp(opts.Dir, "lockstep-capture.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return err
	}
	if err := prepareFixture(dir); err != nil {
		return err
	}
	fx := newFixture(dir, exe, opts.PortBase+i)
	for _, f := range []string{fx.spaced, fx.gone, fx.moved2} {
		if err := os.WriteFile(f, []byte("lockstep capture\n"), 0o644); err != nil {
			return err
		}
	}
	if name == "capture.abstract_unix" {
		ln, err := net.Listen("unix", "@"+abstractName(fx.port))
		if err != nil {
			return err
		}
		defer ln.Close()
	}
	return around(ctx, func() int {
		pid, stdout, stderr, runErr := runChild(ctx, name, fx)
		var rep childReport
		if jerr := json.Unmarshal(bytes.TrimSpace(stdout), &rep); jerr != nil {
			fmt.Fprintf(cases, "%s %s pid=%d no report (%v): %s\n", pass, name, pid, runErr, oneLine(stderr))
		} else {
			fmt.Fprintf(cases, "%s %s pid=%d errno=%s dir=%s port=%d\n", pass, name, pid, errnoName(rep.Errno), dir, fx.port)
		}
		return pid
	})
}

// capturePrintk runs the scenarios with audit enabled and no daemon, and
// keeps what the kernel printed.
func capturePrintk(ctx context.Context, names []string, exe string, opts CaptureOptions, cases io.Writer) error {
	restoreAudit, err := audit.EnableWithoutDaemon()
	if err != nil {
		return fmt.Errorf("capture printk: %w", err)
	}
	defer restoreAudit()
	defer unlimitPrintk()()
	k, err := openKmsg()
	if err != nil {
		return fmt.Errorf("capture printk: %w", err)
	}
	defer unix.Close(k.fd)
	err = capturePass(ctx, "printk", names, exe, opts, cases, func(ctx context.Context, run func() int) error {
		pid := run()
		done, err := k.waitDeallocated(pid, opts.Wait)
		if err != nil {
			return err
		}
		if !done {
			fmt.Fprintf(cases, "#   printk: no deallocation of pid %d's domain within %v\n", pid, opts.Wait)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("capture printk: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "kmsg.txt"), []byte(strings.Join(k.lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return writeDmesg(ctx, filepath.Join(opts.Out, "dmesg.txt"), k.lines)
}

// unlimitPrintk turns the kernel's printk rate limit off, where it can,
// and returns what puts it back.
func unlimitPrintk() (restore func()) {
	const ratelimit = "/proc/sys/kernel/printk_ratelimit"
	old, err := os.ReadFile(ratelimit)
	if err != nil {
		return func() {}
	}
	if err := os.WriteFile(ratelimit, []byte("0\n"), 0o644); err != nil {
		return func() {}
	}
	return func() { os.WriteFile(ratelimit, old, 0o644) }
}

// kmsg reads the kernel's log from its end on, keeping the audit records.
type kmsg struct {
	fd    int
	buf   []byte
	lines []string
}

// openKmsg opens /dev/kmsg at its end. A raw descriptor: an O_NONBLOCK
// os.File would wait in the poller instead of answering EAGAIN.
func openKmsg() (*kmsg, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seek /dev/kmsg: %w", err)
	}
	return &kmsg{fd: fd, buf: make([]byte, 16384)}, nil
}

// drain reads every record there is now.
func (k *kmsg) drain() error {
	for {
		n, err := unix.Read(k.fd, k.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EPIPE):
			return errors.New("/dev/kmsg overwrote records before they were read")
		case err != nil:
			return fmt.Errorf("read /dev/kmsg: %w", err)
		case n <= 0:
			return nil
		}
		// One record per read; continuation lines (" KEY=value") follow it.
		l, _, _ := strings.Cut(string(k.buf[:n]), "\n")
		if strings.Contains(l, ";audit: type=") {
			k.lines = append(k.lines, l)
		}
	}
}

// waitDeallocated reads until pid's domain is deallocated, when its
// records are all printed, and reports whether that happened within wait.
func (k *kmsg) waitDeallocated(pid int, wait time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	domain := ""
	for time.Now().Before(deadline) {
		if err := k.drain(); err != nil {
			return false, err
		}
		for _, l := range k.lines {
			if strings.Contains(l, "status=allocated") && strings.Contains(l, " pid="+strconv.Itoa(pid)+" ") {
				domain = l[strings.Index(l, "domain="):]
				domain = domain[:strings.IndexByte(domain, ' ')]
			}
			if domain != "" && strings.Contains(l, domain+" status=deallocated") {
				return true, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false, nil
}

// writeDmesg writes to path the lines of dmesg(1), which formats the same
// ring, that carry the serials of the records in lines.
func writeDmesg(ctx context.Context, path string, lines []string) error {
	serials := map[string]bool{}
	for _, l := range lines {
		if r, err := audit.ParseLine(l); err == nil {
			serials[strconv.FormatUint(r.Serial, 10)] = true
		}
	}
	out, err := exec.CommandContext(ctx, "dmesg").Output()
	if err != nil {
		return fmt.Errorf("capture: dmesg: %w", err)
	}
	var keep []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		r, err := audit.ParseLine(sc.Text())
		if err == nil && serials[strconv.FormatUint(r.Serial, 10)] {
			keep = append(keep, sc.Text())
		}
	}
	return os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

func sortedKeys(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}
