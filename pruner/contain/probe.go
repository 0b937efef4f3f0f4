package contain

import (
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
	fmt.Fprintln(stdout, "START")
	name, a := args[0], args[1:]
	num := func(i int) int {
		if i >= len(a) {
			return -1
		}
		n, err := strconv.Atoi(a[i])
		if err != nil || n < 0 {
			return -1
		}
		return n
	}
	var err error
	ret := 0
	switch {
	case name == "read" && len(a) == 1:
		var fd int
		fd, err = unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
		}
	case name == "write" && len(a) == 1:
		var fd int
		fd, err = unix.Open(a[0], unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
		if err == nil {
			unix.Close(fd)
		}
	case name == "create" && len(a) == 1:
		p := filepath.Join(a[0], WriteCheckName)
		var fd int
		fd, err = unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err == nil {
			unix.Close(fd)
			os.Remove(p)
		}
	case (name == "connect" || name == "bind") && len(a) == 1:
		sa, fam, e := sockaddr(a[0])
		if e != nil {
			fmt.Fprintln(os.Stderr, "contain-probe:", e)
			return 2
		}
		fd, e := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if e != nil {
			err = e
			break
		}
		if name == "connect" {
			err = unix.Connect(fd, sa)
		} else {
			err = unix.Bind(fd, sa)
		}
		unix.Close(fd)
	case name == "nofile" && num(0) >= 0:
		var fds []int
		for i := 0; i <= num(0); i++ {
			fd, e := unix.Dup(1)
			if e != nil {
				err, ret = e, len(fds)
				break
			}
			fds = append(fds, fd)
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	case name == "nproc" && num(0) >= 0:
		self, e := os.Executable()
		if e != nil {
			err = e
			break
		}
		// No descriptors are passed: os/exec would open /dev/null, which
		// the policy need not grant.
		var kids []*os.Process
		for i := 0; i <= num(0); i++ {
			pr, e := os.StartProcess(self, []string{self, Verb, "pause"}, &os.ProcAttr{Files: []*os.File{nil, nil, nil}})
			if e != nil {
				err, ret = e, len(kids)
				if pe, ok := e.(*os.PathError); ok {
					err = pe.Err
				}
				break
			}
			kids = append(kids, pr)
		}
		for _, pr := range kids {
			pr.Kill()
			pr.Wait()
		}
	case name == "mem" && num(0) >= 0:
		var b []byte
		b, err = unix.Mmap(-1, 0, (num(0)+1)<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err == nil {
			unix.Munmap(b)
		}
	case name == "fsize" && num(0) >= 0 && len(a) == 2:
		signal.Ignore(syscall.SIGXFSZ)
		p := filepath.Join(a[1], FsizeCheckName)
		fd, e := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if e != nil {
			err = e
			break
		}
		chunk := make([]byte, 1<<20)
		for i := 0; i <= num(0); i++ {
			if _, e := unix.Write(fd, chunk); e != nil {
				err, ret = e, i
				break
			}
		}
		unix.Close(fd)
		os.Remove(p)
	case name == "sleep" && num(0) >= 0:
		time.Sleep(time.Duration(num(0)) * time.Second)
	case name == "spin" && num(0) >= 0:
		for {
			var ru unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &ru)
			if ru.Utime.Sec+ru.Stime.Sec >= int64(num(0)) {
				break
			}
			for i := 0; i < 1e7; i++ {
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "contain-probe: unknown operation %q\n", args)
		return 2
	}
	op(stdout, name, ret, err)
	if err != nil {
		return 1
	}
	return 0
}
