package control

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Options configures a replay. The zero value replays everything but
// pseudo-terminal ioctls, and creates (and removes) a temporary file to
// replay a create.
type Options struct {
	// PseudoTerminals allows the [ioctl] replay on a fresh pseudo-terminal
	// pair (an exercise that declares uses_pseudo_terminals).
	PseudoTerminals bool
	// NoCreate replays [create] with faccessat(W_OK|X_OK) instead of a
	// temporary file, leaving the file system untouched.
	NoCreate bool
}

// Check is one replayed access.
type Check struct {
	// Path is the object replayed (after the /proc and /dev/pts mapping
	// and symlink resolution); empty for a network check.
	Path string
	// Section is the section the access stands for.
	Section policy.Section
	// How says what was done ("open O_RDONLY", "faccessat W_OK|X_OK",
	// "bind 127.0.0.1:8080/tcp").
	How string
	// Err is nil when the access succeeded.
	Err error
}

// Verdict is the outcome of replaying one refusal.
type Verdict struct {
	Refusal *attribute.Refusal
	// Landlock is true when every check succeeded: the refusal can only
	// have been Landlock's.
	Landlock bool
	Checks   []Check
	// Reason explains a false Landlock in one sentence (the first failed
	// check, or why nothing was replayed).
	Reason string
}

// Replay replays one refusal.
func Replay(r *attribute.Refusal, opts Options) Verdict {
	v := Verdict{Refusal: r}
	switch {
	case !r.Layer.Grantable():
		v.Reason = fmt.Sprintf("a %s refusal is never replayed", r.Layer)
		return v
	case r.Layer == attribute.Filesystem && len(r.Needs) == 0,
		r.Layer == attribute.Network && len(r.Net) == 0:
		v.Reason = "the refusal names no object to replay"
		return v
	}
	tgid := 0
	if r.Call != nil {
		tgid = r.Call.TGID
	}
	for _, n := range r.Needs {
		p := mapPath(n.Path, tgid, opts.PseudoTerminals)
		for _, s := range n.Sections {
			v.Checks = append(v.Checks, replayFS(p, s, n.Rights, r, opts))
		}
	}
	if slices.Contains(r.Sections, policy.Restructure) && len(r.Needs) >= 2 {
		v.Checks = append(v.Checks, sameDevice(mapPath(r.Needs[0].Path, tgid, false), mapPath(r.Needs[1].Path, tgid, false)))
	}
	for _, n := range r.Net {
		v.Checks = append(v.Checks, replayNet(n, r.Detail))
	}
	v.Landlock = true
	for _, c := range v.Checks {
		if c.Err != nil {
			v.Landlock = false
			v.Reason = fmt.Sprintf("replayed outside the sandbox, %s %s failed too: %v", c.How, c.Path, c.Err)
			break
		}
	}
	return v
}

// mapPath maps the refusing process's own /proc entries to /proc/self and
// /proc/thread-self, and a vanished pseudo-terminal slave to ptmx.
func mapPath(p string, tgid int, pty bool) string {
	if tgid > 0 {
		self := "/proc/" + strconv.Itoa(tgid)
		if rest, ok := strings.CutPrefix(p, self); ok && (rest == "" || rest[0] == '/') {
			p = "/proc/self" + rest
			if r2, ok := strings.CutPrefix(rest, "/task/"); ok {
				tid, tail, _ := strings.Cut(r2, "/")
				if _, err := strconv.Atoi(tid); err == nil {
					p = "/proc/thread-self"
					if tail != "" {
						p += "/" + tail
					}
				}
			}
		}
		for _, d := range []string{"/fd/", "/fdinfo/"} {
			if i := strings.Index(p, d); i >= 0 && (strings.HasPrefix(p, "/proc/self/") || strings.HasPrefix(p, "/proc/thread-self/")) {
				p = p[:i+len(d)-1]
			}
		}
	}
	if pty && strings.HasPrefix(p, "/dev/pts/") && p != "/dev/pts/ptmx" {
		if _, err := os.Lstat(p); err != nil {
			p = "/dev/pts/ptmx"
		}
	}
	return p
}

const openFlags = unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC

func replayFS(p string, s policy.Section, rights []attribute.Right, r *attribute.Refusal, opts Options) Check {
	c := Check{Path: p, Section: s}
	real, err := filepath.EvalSymlinks(p)
	missing := errors.Is(err, os.ErrNotExist)
	if err == nil {
		c.Path = real
	}
	if missing && r.Op == "create" && (s == policy.Read || s == policy.Write) {
		// The open would have created the file: its access mode is
		// replayed as a create in its directory.
		return replayCreate(p, policy.Create, []attribute.Right{landlock.MakeReg}, opts)
	}
	switch s {
	case policy.Read:
		if err != nil {
			c.How, c.Err = "resolve", err
			return c
		}
		c.How, c.Err = replayRead(real, slices.Contains(rights, landlock.ResolveUnix))
	case policy.Write:
		if err != nil {
			c.How, c.Err = "resolve", err
			return c
		}
		c.How, c.Err = replayWrite(real)
	case policy.Execute:
		if err != nil {
			c.How, c.Err = "resolve", err
			return c
		}
		c.How, c.Err = replayExec(real)
	case policy.Ioctl:
		c.How = "ioctl " + r.Detail
		if !opts.PseudoTerminals {
			c.Err = errors.New("ioctl replay needs a pseudo-terminal exercise")
			return c
		}
		c.Err = replayPty(r.Detail)
	default:
		return replayCreate(p, s, rights, opts)
	}
	return c
}

func replayRead(p string, resolveUnix bool) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "stat", err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "open O_RDONLY|O_DIRECTORY", openClose(p, unix.O_RDONLY|unix.O_DIRECTORY)
	case unix.S_IFREG:
		return "open O_RDONLY", openClose(p, unix.O_RDONLY)
	case unix.S_IFSOCK:
		if resolveUnix {
			return "faccessat W_OK", unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS)
		}
	}
	return "faccessat R_OK", unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK, unix.AT_EACCESS)
}

func replayWrite(p string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "stat", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		return "open O_WRONLY", openClose(p, unix.O_WRONLY)
	}
	return "faccessat W_OK", unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS)
}

func replayExec(p string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "stat", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "stat", fmt.Errorf("not a regular file (mode %#o)", st.Mode)
	}
	if st.Mode&0o111 == 0 {
		return "stat", fmt.Errorf("no execute bit (mode %#o)", st.Mode&0o7777)
	}
	return "faccessat X_OK", unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS)
}

func openClose(p string, flags int) error {
	fd, err := unix.Open(p, flags|openFlags, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// nearestDir returns p itself if it is an existing directory, else its
// nearest existing ancestor directory.
func nearestDir(p string) string {
	for {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
		if p == "/" || p == "." {
			return p
		}
		p = path.Dir(p)
	}
}

func replayCreate(p string, s policy.Section, rights []attribute.Right, opts Options) Check {
	d := nearestDir(p)
	if real, err := filepath.EvalSymlinks(d); err == nil {
		d = real
	}
	c := Check{Path: d, Section: s}
	if s == policy.Create && !opts.NoCreate {
		if slices.Contains(rights, landlock.MakeDir) && !slices.Contains(rights, landlock.MakeReg) {
			c.How = "mkdtemp+rmdir"
			name, err := os.MkdirTemp(d, ".lockstep-control-*")
			if err == nil {
				err = os.Remove(name)
			}
			c.Err = err
			return c
		}
		c.How = "mkstemp+unlink"
		f, err := os.CreateTemp(d, ".lockstep-control-*")
		if err == nil {
			err = errors.Join(f.Close(), os.Remove(f.Name()))
		}
		c.Err = err
		return c
	}
	c.How = "faccessat W_OK|X_OK"
	c.Err = unix.Faccessat(unix.AT_FDCWD, d, unix.W_OK|unix.X_OK, unix.AT_EACCESS)
	return c
}

func sameDevice(a, b string) Check {
	da, db := nearestDir(a), nearestDir(b)
	c := Check{Path: da + " " + db, Section: policy.Restructure, How: "same device"}
	var sa, sb unix.Stat_t
	if err := unix.Stat(da, &sa); err != nil {
		c.Err = err
		return c
	}
	if err := unix.Stat(db, &sb); err != nil {
		c.Err = err
		return c
	}
	if sa.Dev != sb.Dev {
		c.Err = fmt.Errorf("the parents are on different devices (%d, %d): a real cross-device move", sa.Dev, sb.Dev)
	}
	return c
}

func replayNet(n attribute.NetNeed, family string) Check {
	c := Check{Section: n.Section}
	six := family == "AF_INET6" || n.Addr.Is6() && !n.Addr.Is4In6()
	if n.Section == policy.Bind {
		addr := netip.MustParseAddr("127.0.0.1")
		network := "tcp4"
		if six {
			addr, network = netip.IPv6Loopback(), "tcp6"
		}
		if n.Transport == policy.UDP {
			network = "udp" + network[3:]
		}
		ap := netip.AddrPortFrom(addr, uint16(n.Port))
		c.How = "bind " + ap.String() + "/" + string(n.Transport)
		if n.Port == 0 {
			return c // a kernel-chosen port is always available
		}
		var err error
		if n.Transport == policy.UDP {
			var pc net.PacketConn
			if pc, err = net.ListenPacket(network, ap.String()); err == nil {
				err = pc.Close()
			}
		} else {
			var l net.Listener
			if l, err = net.Listen(network, ap.String()); err == nil {
				err = l.Close()
			}
		}
		if errors.Is(err, unix.EACCES) {
			c.Err = err
		}
		return c
	}
	if !n.Addr.IsValid() {
		c.How, c.Err = "connect", errors.New("no destination address")
		return c
	}
	ap := netip.AddrPortFrom(n.Addr, uint16(n.Port))
	c.How = "connect udp " + ap.String() + " (no packet)"
	network := "udp4"
	if six {
		network = "udp6"
	}
	conn, err := net.DialUDP(network, nil, net.UDPAddrFromAddrPort(ap))
	if err == nil {
		err = conn.Close()
	}
	if errors.Is(err, unix.EACCES) {
		c.Err = err
	}
	return c
}

// replayPty repeats an ioctl request on a fresh pseudo-terminal pair.
func replayPty(req string) error {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/ptmx: %w", err)
	}
	defer unix.Close(m)
	switch req {
	case "TIOCSPTLCK":
		return unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0)
	case "TIOCGPTN":
		_, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
		return err
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlock the pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		return fmt.Errorf("TIOCGPTN: %w", err)
	}
	s, err := unix.Open("/dev/pts/"+strconv.Itoa(int(n)), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the slave: %w", err)
	}
	defer unix.Close(s)
	switch req {
	case "TCGETS":
		_, err = unix.IoctlGetTermios(s, unix.TCGETS)
	case "TCSETS", "TCSETSW", "TCSETSF":
		var t *unix.Termios
		if t, err = unix.IoctlGetTermios(s, unix.TCGETS); err == nil {
			code := map[string]uint{"TCSETS": unix.TCSETS, "TCSETSW": unix.TCSETSW, "TCSETSF": unix.TCSETSF}[req]
			err = unix.IoctlSetTermios(s, code, t)
		}
	case "TIOCGWINSZ":
		_, err = unix.IoctlGetWinsize(s, unix.TIOCGWINSZ)
	case "TIOCSWINSZ":
		var w *unix.Winsize
		if w, err = unix.IoctlGetWinsize(s, unix.TIOCGWINSZ); err == nil {
			err = unix.IoctlSetWinsize(s, unix.TIOCSWINSZ, w)
		}
	default:
		err = fmt.Errorf("request %s cannot be repeated on a fresh pair", req)
	}
	return err
}

// Interpreter returns the program the kernel loads to run the executable p:
// the first word of a `#!` line, or an ELF file's PT_INTERP (the dynamic
// loader). It returns "" for a static ELF file and an error for a file it
// cannot read or recognise.
func Interpreter(p string) (string, error) {
	f, err := safefile.Open(p)
	if err != nil {
		return "", fmt.Errorf("interpreter of %s: %w", p, err)
	}
	defer f.Close()
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("interpreter of %s: %w", p, err)
	}
	head = head[:n]
	if rest, ok := bytes.CutPrefix(head, []byte("#!")); ok {
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			return "", fmt.Errorf("interpreter of %s: empty #! line", p)
		}
		return fields[0], nil
	}
	if !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return "", fmt.Errorf("interpreter of %s: neither #! nor ELF", p)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", fmt.Errorf("interpreter of %s: %w", p, err)
	}
	for _, prog := range ef.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, min(prog.Filesz, 4096))
		if _, err := prog.ReadAt(b, 0); err != nil && err != io.EOF {
			return "", fmt.Errorf("interpreter of %s: PT_INTERP: %w", p, err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// WithInterpreter adds to an execute refusal what the kernel also opens for
// execution: a script's interpreter and an ELF file's loader, recursively
// (at most four deep), each needing [execute] and [read]. Other refusals
// are returned unchanged. An interpreter that cannot be found or executed
// here is left out (with what it would load): the kernel would have
// answered ENOENT or the file's own EACCES, so it cannot be what Landlock
// refused.
func WithInterpreter(r *attribute.Refusal) *attribute.Refusal {
	if r.Layer != attribute.Filesystem || r.Op != "execute" {
		return r
	}
	out := *r
	out.Needs = slices.Clone(r.Needs)
	seen := map[string]bool{}
	for _, n := range r.Needs {
		seen[n.Path] = true
	}
	var add []attribute.Need
	for _, n := range r.Needs {
		p := n.Path
		for range 4 {
			interp, err := Interpreter(p)
			if err != nil || interp == "" || seen[interp] {
				break
			}
			if _, err := replayExec(interp); err != nil {
				break
			}
			seen[interp] = true
			add = append(add, attribute.NewNeed(interp, landlock.Execute, landlock.ReadFile))
			p = interp
		}
	}
	if len(add) > 0 {
		out.Add(add...)
	}
	return &out
}
