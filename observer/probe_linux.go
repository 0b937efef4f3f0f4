package observer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ProbeArgs is the argv (after the lockstep binary) of a containment probe
// child trying op with arg; cmd/lockstep's observe verb hands --probe and
// --probe-arg to ProbeMain. (A LOCKSTEP_ROLE would not do: the enforcer
// strips it from the command's environment.)
func ProbeArgs(op, arg string) []string {
	return []string{"observe", "--probe", op, "--probe-arg", arg}
}

// Probe exit statuses: the access was refused as wanted, it was allowed, or
// the probe could not tell.
const (
	probeHeld    = 0
	probeAllowed = 1
	probeError   = 2
)

// ProbeMain is the probe child (`lockstep observe --probe op --probe-arg
// arg`): it tries the access op names and returns 0 when it was refused as a
// contained process's must be, 1 when it was allowed, 2 when it could not
// tell. One line on stdout says what happened.
func ProbeMain(op, arg string) int {
	held, detail := probeOnce(op, arg)
	fmt.Println(detail)
	return held
}

func probeOnce(op, arg string) (int, string) {
	refused := func(err error, what string) (int, string) {
		switch {
		case err == nil:
			return probeAllowed, what + " succeeded"
		case errors.Is(err, unix.EACCES):
			return probeHeld, what + ": " + err.Error()
		}
		return probeError, what + ": " + err.Error() + " (wanted EACCES)"
	}
	switch op {
	case "read":
		_, err := os.ReadFile(arg)
		return refused(err, "read "+arg)
	case "write":
		fi, err := os.Stat(arg)
		if err != nil {
			return probeError, err.Error()
		}
		if fi.IsDir() {
			name := filepath.Join(arg, ".lockstep-probe")
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err == nil {
				f.Close()
				os.Remove(name)
			}
			return refused(err, "create "+name)
		}
		f, err := os.OpenFile(arg, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return refused(err, "open "+arg+" for writing")
	case "connect":
		c, err := net.DialTimeout("tcp4", arg, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return refused(err, "connect "+arg)
	case "nofile":
		n, _ := strconv.Atoi(arg)
		var fds []int
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		for i := 0; i < n+16; i++ {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				if errors.Is(err, unix.EMFILE) {
					return probeHeld, fmt.Sprintf("EMFILE after %d pipes (limit %d descriptors)", i, n)
				}
				return probeError, err.Error()
			}
			fds = append(fds, p[0], p[1])
		}
		return probeAllowed, fmt.Sprintf("opened %d descriptors, limit %d", len(fds), n)
	case "fsize_mb":
		n, _ := strconv.ParseInt(arg, 10, 64)
		signal.Ignore(syscall.SIGXFSZ)
		fd, err := unix.MemfdCreate("lockstep-probe", unix.MFD_CLOEXEC)
		if err != nil {
			return probeError, err.Error()
		}
		defer unix.Close(fd)
		if err := unix.Ftruncate(fd, n<<20); err != nil {
			return probeError, fmt.Sprintf("a file of exactly %d MiB: %v", n, err)
		}
		err = unix.Ftruncate(fd, n<<20+1)
		if errors.Is(err, unix.EFBIG) {
			return probeHeld, fmt.Sprintf("a file one byte over %d MiB: %v", n, err)
		}
		return probeAllowed, fmt.Sprintf("a file one byte over %d MiB: %v", n, err)
	case "mem_mb":
		n, _ := strconv.ParseInt(arg, 10, 64)
		size := int((n + 64) << 20)
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if errors.Is(err, unix.ENOMEM) {
			return probeHeld, fmt.Sprintf("mapping %d MiB: %v", n+64, err)
		}
		if err == nil {
			unix.Munmap(b)
		}
		return probeAllowed, fmt.Sprintf("mapping %d MiB: %v", n+64, err)
	case "nproc":
		n, _ := strconv.Atoi(arg)
		var procs []*os.Process
		defer func() {
			for _, p := range procs {
				p.Kill()
				p.Wait()
			}
		}()
		exe, _ := os.Executable()
		for i := 0; i < n+2; i++ {
			p, err := os.StartProcess(exe, append([]string{exe}, ProbeArgs("sleep", "30s")...), &os.ProcAttr{})
			if err != nil {
				if errors.Is(err, unix.EAGAIN) {
					return probeHeld, fmt.Sprintf("EAGAIN after %d processes (limit %d)", i, n)
				}
				return probeError, err.Error()
			}
			procs = append(procs, p)
		}
		return probeAllowed, fmt.Sprintf("started %d processes, limit %d", len(procs), n)
	case "sleep":
		d, _ := time.ParseDuration(arg)
		time.Sleep(d)
		return probeAllowed, "slept " + arg
	case "spin":
		n, _ := strconv.Atoi(arg)
		end := time.Now().Add(time.Duration(n) * time.Second)
		for time.Now().Before(end) {
		}
		return probeAllowed, "spun " + arg + " s"
	}
	return probeError, fmt.Sprintf("unknown probe %q", op)
}
