package lane

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/nsexec"
	"golang.org/x/sys/unix"
)

// Verb is the role's first argument: `<program> lane-run --from F --at W
// [--cpus L] -- <command>…`.
const Verb = "lane-run"

// SetupStatus is the role's exit status when the lane could not be set up;
// the command has not run. Its message names what failed.
const SetupStatus = 125

// Command is the argv prefix that runs a command in a lane: program (e.g.
// {lockstep}), the verb, the copy, the working directory and, when cpus is
// not empty, the only CPUs the run may use. The command follows.
func Command(program []string, from, at string, cpus []int) []string {
	argv := append(append([]string(nil), program...), Verb, "--from", from, "--at", at)
	if len(cpus) > 0 {
		argv = append(argv, "--cpus", FormatCPUs(cpus))
	}
	return append(argv, "--")
}

// FormatCPUs is the --cpus value of cpus: their numbers, comma-separated.
func FormatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// ParseCPUs reads a --cpus value: CPU numbers, comma-separated; "" is none
// (the run keeps the CPUs it was started with).
func ParseCPUs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(f)
		if err != nil || c < 0 || c >= 1024 {
			return nil, fmt.Errorf("--cpus %q: want CPU numbers from 0 to 1023, comma-separated, like 1,2", s)
		}
		cpus = append(cpus, c)
	}
	return cpus, nil
}

// Exec enters a lane (Enter) and executes argv in place of this process,
// so the run's process is the command's and a signal to its process group
// reaches it. It returns only on failure, with SetupStatus.
func Exec(from, at string, cpus []int, argv []string, stderr io.Writer) int {
	if len(argv) == 0 || from == "" || at == "" {
		fmt.Fprintf(stderr, "lockstep %s: needs --from <copy> --at <working directory> -- <command>…\n", Verb)
		return SetupStatus
	}
	return nsexec.Exec(Verb, SetupStatus, func() error { return Enter(from, at, cpus) }, "", argv, stderr)
}

// Enter moves the calling thread (locked to its goroutine) into a mount
// and a network namespace of its own, binds from over at, brings the
// loopback up and changes into at. With cpus, the thread (and so the
// command it executes) may run on those CPUs only: the observer keeps a
// traced run on a CPU of its own while lanes run beside it, and a lane
// started meanwhile would otherwise inherit that one CPU from the thread
// that forked it.
func Enter(from, at string, cpus []int) error {
	if len(cpus) > 0 {
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("sched_setaffinity(%s): %w", FormatCPUs(cpus), err)
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS|CLONE_NEWNET): %w (a lane needs CAP_SYS_ADMIN)", err)
	}
	// Private first, so the bind below stays in this namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount(from, at, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s over %s: %w", from, at, err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	// The process started in at's old directory, which the bind covers.
	if err := unix.Chdir(at); err != nil {
		return fmt.Errorf("chdir %s: %w", at, err)
	}
	return nil
}

// loopbackUp sets IFF_UP on lo; the kernel then gives it 127.0.0.1/8 (and
// ::1), as it does at boot.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// Main is the role for a program that serves it by hand (tests): it parses
// `--from F --at W [--cpus L] -- <command>…` and calls Exec. It returns
// only on failure: SetupStatus, or 2 for bad arguments.
func Main(args []string, stderr io.Writer) int {
	var from, at, cpuList string
	for len(args) >= 2 && args[0] != "--" {
		switch args[0] {
		case "--from":
			from = args[1]
		case "--at":
			at = args[1]
		case "--cpus":
			cpuList = args[1]
		default:
			fmt.Fprintf(stderr, "lockstep %s: unknown argument %q\n", Verb, args[0])
			return 2
		}
		args = args[2:]
	}
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintf(stderr, "usage: %s --from <copy> --at <working directory> [--cpus <list>] -- <command>…\n", Verb)
		return 2
	}
	cpus, err := ParseCPUs(cpuList)
	if err != nil {
		fmt.Fprintf(stderr, "lockstep %s: %v\n", Verb, err)
		return 2
	}
	return Exec(from, at, cpus, args[1:], stderr)
}
