package contain

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Verb is the hidden lockstep verb that runs ProbeMain.
const Verb = "contain-probe"

// WriteCheckName and FsizeCheckName are the files the probe tries to create.
const (
	WriteCheckName = "lockstep-prune-write-check"
	FsizeCheckName = "lockstep-prune-fsize-check"
)

func op(w io.Writer, name string, ret int, err error) {
	e := "0"
	if err != nil {
		if en, ok := err.(syscall.Errno); ok {
			e = unix.ErrnoName(en)
		} else {
			e = err.Error()
		}
	}
	fmt.Fprintf(w, "OP %s ret=%d errno=%s\n", name, ret, e)
}

func sockaddr(s string) (unix.Sockaddr, int, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, 0, err
	}
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, unix.AF_INET, nil
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}, unix.AF_INET6, nil
}

// ProbeMain runs one probe operation and returns the exit status: 0 when
// the operation succeeded, 1 when it was refused, 2 on a wrong call.
//
//	read <path>            open O_RDONLY
//	write <path>           open O_WRONLY, never creating or truncating
//	create <dir>           create <dir>/lockstep-prune-write-check (O_EXCL), removed again
//	connect <addr:port>    TCP connect
//	bind <addr:port>       TCP bind
//	nofile <n>             duplicate descriptors until n+1 are open
//	nproc <n>              start n+1 processes (each `contain-probe pause`)
//	mem <mib>              map mib+1 MiB of address space
//	fsize <mib> <dir>      write mib+1 MiB into one file in dir, removed again
//	sleep <seconds>        sleep
//	spin <seconds>         spend that much CPU time
//	pause                  sleep until killed (a child of nproc)
//	batch <k> <op>… …      the operations in turn, each given as its word
//	                       count k and its words (Batch), one OP line each;
//	                       1 when any was refused
func ProbeMain(args []string, stdout io.Writer) int {
	// The probe stands for the exercise's processes, which SIGTERM ends;
	// lockstep's main catches it for its own verbs. Caught here, the
	// timeout check's probe slept through the enforcer's SIGTERM and ended
	// only at its SIGKILL, the grace period (2 s) after the timeout.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "contain-probe: no operation")
		return 2
	}
	if args[0] == "pause" {
		time.Sleep(time.Hour)
		return 0
	}
	ops := [][]string{args}
	if args[0] == BatchOp {
		var ok bool
		if ops, ok = splitBatch(args[1:]); !ok {
			fmt.Fprintf(os.Stderr, "contain-probe: malformed batch %q\n", args)
			return 2
		}
	}
	fmt.Fprintln(stdout, "START")
	status := 0
	for _, o := range ops {
		ret, err := operate(o[0], o[1:])
		if err == errUsage {
			fmt.Fprintf(os.Stderr, "contain-probe: unknown operation %q\n", o)
			return 2
		}
		op(stdout, o[0], ret, err)
		if err != nil {
			status = 1
		}
	}
	return status
}

// BatchOp is the probe operation that runs several in one process.
const BatchOp = "batch"

// Batch is the probe's arguments that run each of ops (each an
// operation's words, name first) in turn in one process:
// batch <k1> <op1>… <k2> <op2>…, each k the word count of its operation.
func Batch(ops ...[]string) []string {
	args := []string{BatchOp}
	for _, o := range ops {
		args = append(append(args, strconv.Itoa(len(o))), o...)
	}
	return args
}

// Operations is how many probe operations args (a probe's arguments) runs.
func Operations(args []string) int {
	if len(args) == 0 || args[0] != BatchOp {
		return 1
	}
	ops, _ := splitBatch(args[1:])
	return len(ops)
}

// splitBatch reads Batch's word counts back into operations. A batch holds
// no pause (it never returns) and no batch.
func splitBatch(a []string) ([][]string, bool) {
	var ops [][]string
	for len(a) > 0 {
		k, err := strconv.Atoi(a[0])
		if err != nil || k < 1 || k > len(a)-1 {
			return nil, false
		}
		o := a[1 : 1+k]
		if o[0] == "pause" || o[0] == BatchOp {
			return nil, false
		}
		ops, a = append(ops, o), a[1+k:]
	}
	return ops, len(ops) > 0
}

// errUsage is operate's answer to an operation or arguments it does not know.
var errUsage = errors.New("unknown operation")

// operate runs operation name with arguments a.
func operate(name string, a []string) (ret int, err error) {
	n := count(a)
	switch {
	case name == "read" && len(a) == 1:
		err = probeOpen(a[0], unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK)
	case name == "write" && len(a) == 1:
		err = probeOpen(a[0], unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW)
	case name == "create" && len(a) == 1:
		err = probeCreate(a[0])
	case (name == "connect" || name == "bind") && len(a) == 1:
		sa, fam, e := sockaddr(a[0])
		if e != nil {
			return 0, errUsage
		}
		err = probeSocket(name == "connect", fam, sa)
	case name == "nofile" && n >= 0:
		ret, err = probeNofile(n)
	case name == "nproc" && n >= 0:
		ret, err = probeNproc(n)
	case name == "mem" && n >= 0:
		err = probeMem(n)
	case name == "fsize" && n >= 0 && len(a) == 2:
		ret, err = probeFsize(n, a[1])
	case name == "sleep" && n >= 0:
		time.Sleep(time.Duration(n) * time.Second)
	case name == "spin" && n >= 0:
		spin(n)
	default:
		return 0, errUsage
	}
	return ret, err
}

// count is an operation's first argument as a count, -1 when it is missing
// or not a number at least 0.
func count(a []string) int {
	if len(a) == 0 {
		return -1
	}
	n, err := strconv.Atoi(a[0])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// probeOpen opens path with flags and closes it again.
func probeOpen(path string, flags int) error {
	fd, err := unix.Open(path, flags, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// probeCreate creates WriteCheckName in dir and removes it again.
func probeCreate(dir string) error {
	p := filepath.Join(dir, WriteCheckName)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err == nil {
		unix.Close(fd)
		os.Remove(p)
	}
	return err
}

// probeSocket connects a TCP socket to sa, or binds one to it.
func probeSocket(connect bool, fam int, sa unix.Sockaddr) error {
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if connect {
		return unix.Connect(fd, sa)
	}
	return unix.Bind(fd, sa)
}

// probeNofile duplicates stdout n+1 times, returning how many it got
// before a refusal; it closes them all again.
func probeNofile(n int) (int, error) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for i := 0; i <= n; i++ {
		fd, err := unix.Dup(1)
		if err != nil {
			return len(fds), err
		}
		fds = append(fds, fd)
	}
	return 0, nil
}

// probeNproc starts n+1 pausing probes, returning how many started before
// a refusal; it kills and reaps them all again.
func probeNproc(n int) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	var kids []*os.Process
	defer func() {
		for _, pr := range kids {
			pr.Kill()
			pr.Wait()
		}
	}()
	for i := 0; i <= n; i++ {
		// No descriptors are passed: os/exec would open /dev/null, which
		// the policy need not grant.
		pr, err := os.StartProcess(self, []string{self, Verb, "pause"}, &os.ProcAttr{Files: []*os.File{nil, nil, nil}})
		if err != nil {
			if pe, ok := err.(*os.PathError); ok {
				return len(kids), pe.Err
			}
			return len(kids), err
		}
		kids = append(kids, pr)
	}
	return 0, nil
}

// probeMem maps mib+1 MiB of anonymous memory and unmaps it again.
func probeMem(mib int) error {
	b, err := unix.Mmap(-1, 0, (mib+1)<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err == nil {
		unix.Munmap(b)
	}
	return err
}

// probeFsize writes mib+1 MiB into FsizeCheckName in dir, returning how
// many MiB it wrote before a refusal; it removes the file again. SIGXFSZ
// is ignored so that passing the limit fails the write instead.
func probeFsize(mib int, dir string) (int, error) {
	signal.Ignore(syscall.SIGXFSZ)
	p := filepath.Join(dir, FsizeCheckName)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(p)
	defer unix.Close(fd)
	chunk := make([]byte, 1<<20)
	for i := 0; i <= mib; i++ {
		if _, err := unix.Write(fd, chunk); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// spin spends seconds of CPU time (user and system).
func spin(seconds int) {
	for {
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		if ru.Utime.Sec+ru.Stime.Sec >= int64(seconds) {
			return
		}
		for i := 0; i < 1e7; i++ {
		}
	}
}
