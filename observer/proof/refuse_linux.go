//go:build linux

package proof

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"golang.org/x/sys/unix"
)

// Role is the LOCKSTEP_ROLE value under which lockstep re-executes itself
// as a refusal child; cmd/lockstep maps it to RefusalMain.
const Role = "proof-refusal"

// Environment of a refusal child.
const (
	envCase = "LOCKSTEP_PROOF_CASE" // the refusal's name
	envDir  = "LOCKSTEP_PROOF_DIR"  // the fixture directory
	envPort = "LOCKSTEP_PROOF_PORT" // the port of a network refusal
	envExe  = "LOCKSTEP_PROOF_EXE"  // the file an execute refusal tries to run
)

// fixture names the objects of the filesystem refusals, all beneath one
// scratch directory the parent prepares (see prepareFixture).
type fixture struct {
	file   string // an existing regular file
	dir    string // a directory holding victim
	victim string
	src    string // holds moved; REFER is granted here
	moved  string
	dst    string // REFER is not granted here
	exe    string
	port   int
	// Objects of the capture scenarios only.
	spaced string // a file whose name holds a space: its path is logged as hex
	gone   string // a file unlinked while open: its path ends " (deleted)"
	moved2 string // moved across directories with REFER granted nowhere
}

func newFixture(dir, exe string, port int) fixture {
	return fixture{
		file:   filepath.Join(dir, "file"),
		dir:    filepath.Join(dir, "d"),
		victim: filepath.Join(dir, "d", "victim"),
		src:    filepath.Join(dir, "src"),
		moved:  filepath.Join(dir, "src", "moved"),
		dst:    filepath.Join(dir, "dst"),
		exe:    exe,
		port:   port,
		spaced: filepath.Join(dir, "with space"),
		gone:   filepath.Join(dir, "gone"),
		moved2: filepath.Join(dir, "src", "moved2"),
	}
}

// spec is how one refusal is made: the ruleset, the call and what it must
// return.
type spec struct {
	attr ll.RulesetAttr
	// grant, if set, adds rules to the ruleset before restricting.
	grant func(fd int, fx fixture) error
	// nr is the system call act makes; want the errno Landlock gives.
	nr   uintptr
	want unix.Errno
	act  func(fx fixture) unix.Errno
}

var atFDCWD = unix.AT_FDCWD

// denied is a refusal Landlock answers with EACCES: system call nr, made
// by act.
func denied(nr uintptr, act func(fixture) unix.Errno) spec {
	return spec{nr: nr, want: unix.EACCES, act: act}
}

// attrOf is the ruleset that handles r alone.
func attrOf(r landlock.Right) ll.RulesetAttr {
	switch r.Class() {
	case landlock.ClassFS:
		return ll.RulesetAttr{HandledAccessFS: r.Bit()}
	case landlock.ClassNet:
		return ll.RulesetAttr{HandledAccessNet: r.Bit()}
	case landlock.ClassScope:
		return ll.RulesetAttr{Scoped: r.Bit()}
	}
	return ll.RulesetAttr{}
}

// specs makes each refusal of Refusals (by its name, in a ruleset handling
// its right alone) and each capture scenario (added by capture_linux.go).
var specs = func() map[string]spec {
	m := make(map[string]spec, len(Refusals))
	for _, rf := range Refusals {
		if sp, ok := rightSpecs[rf.Right]; ok {
			sp.attr = attrOf(rf.Right)
			m[rf.Name] = sp
		}
	}
	return m
}()

// rightSpecs is how each right of Refusals is refused.
var rightSpecs = map[landlock.Right]spec{
	landlock.ReadFile: denied(unix.SYS_OPENAT, func(fx fixture) unix.Errno {
		return openat(fx.file, unix.O_RDONLY, 0)
	}),
	landlock.ReadDir: denied(unix.SYS_OPENAT, func(fx fixture) unix.Errno {
		return openat(fx.dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	}),
	landlock.WriteFile: denied(unix.SYS_OPENAT, func(fx fixture) unix.Errno {
		return openat(fx.file, unix.O_WRONLY, 0)
	}),
	landlock.Truncate: denied(unix.SYS_TRUNCATE, func(fx fixture) unix.Errno {
		p := cstr(fx.file)
		_, _, e := unix.Syscall(unix.SYS_TRUNCATE, uintptr(unsafe.Pointer(p)), 0, 0)
		runtime.KeepAlive(p)
		return e
	}),
	landlock.Execute: denied(unix.SYS_EXECVE, func(fx fixture) unix.Errno {
		p := cstr(fx.exe)
		argv := []*byte{p, nil}
		envv := []*byte{nil}
		_, _, e := unix.Syscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
		runtime.KeepAlive(argv)
		runtime.KeepAlive(envv)
		return e
	}),
	landlock.MakeReg: denied(unix.SYS_OPENAT, func(fx fixture) unix.Errno {
		return openat(filepath.Join(fx.dir, "new-file"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	}),
	landlock.MakeDir: denied(unix.SYS_MKDIRAT, func(fx fixture) unix.Errno {
		p := cstr(filepath.Join(fx.dir, "new-dir"))
		_, _, e := unix.Syscall(unix.SYS_MKDIRAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)), 0o700)
		runtime.KeepAlive(p)
		return e
	}),
	landlock.RemoveFile: denied(unix.SYS_UNLINKAT, func(fx fixture) unix.Errno {
		p := cstr(fx.victim)
		_, _, e := unix.Syscall(unix.SYS_UNLINKAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)), 0)
		runtime.KeepAlive(p)
		return e
	}),
	landlock.MakeSym: denied(unix.SYS_SYMLINKAT, func(fx fixture) unix.Errno {
		t, p := cstr("victim"), cstr(filepath.Join(fx.dir, "new-sym"))
		_, _, e := unix.Syscall(unix.SYS_SYMLINKAT, uintptr(unsafe.Pointer(t)), uintptr(atFDCWD), uintptr(unsafe.Pointer(p)))
		runtime.KeepAlive(t)
		runtime.KeepAlive(p)
		return e
	}),
	landlock.Refer: {
		grant: func(fd int, fx fixture) error {
			return addPathRule(fd, fx.src, landlock.FSRefer)
		},
		nr: unix.SYS_RENAMEAT, want: unix.EXDEV,
		act: func(fx fixture) unix.Errno {
			o, n := cstr(fx.moved), cstr(filepath.Join(fx.dst, "moved"))
			_, _, e := unix.Syscall6(unix.SYS_RENAMEAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(o)), uintptr(atFDCWD), uintptr(unsafe.Pointer(n)), 0, 0)
			runtime.KeepAlive(o)
			runtime.KeepAlive(n)
			return e
		},
	},
	landlock.IoctlDev: denied(unix.SYS_IOCTL, func(fx fixture) unix.Errno {
		fd, err := unix.Open(devNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err.(unix.Errno)
		}
		var buf [64]byte
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TCGETS, uintptr(unsafe.Pointer(&buf[0])))
		return e
	}),
	landlock.BindTCP: denied(unix.SYS_BIND, func(fx fixture) unix.Errno {
		return sockCall(unix.SOCK_STREAM, unix.SYS_BIND, fx.port)
	}),
	landlock.ConnectTCP: denied(unix.SYS_CONNECT, func(fx fixture) unix.Errno {
		return sockCall(unix.SOCK_STREAM, unix.SYS_CONNECT, fx.port)
	}),
	landlock.BindUDP: denied(unix.SYS_BIND, func(fx fixture) unix.Errno {
		return sockCall(unix.SOCK_DGRAM, unix.SYS_BIND, fx.port)
	}),
	landlock.ConnectSendUDP: denied(unix.SYS_CONNECT, func(fx fixture) unix.Errno {
		return sockCall(unix.SOCK_DGRAM, unix.SYS_CONNECT, fx.port)
	}),
	landlock.Signal: {
		nr: unix.SYS_KILL, want: unix.EPERM,
		act: func(fixture) unix.Errno {
			// Signal 0 only checks permission: nothing is delivered.
			_, _, e := unix.Syscall(unix.SYS_KILL, uintptr(unix.Getppid()), 0, 0)
			return e
		},
	},
}

// devNull is the character device the ioctl_dev refusal opens after
// restricting itself (rights of descriptors opened before are never
// re-checked).
const devNull = "/dev/null"

func cstr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic("BUG(lockstep): path with NUL: " + strconv.Quote(s))
	}
	return p
}

func openat(path string, flags int, mode uint32) unix.Errno {
	p := cstr(path)
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)), uintptr(flags|unix.O_CLOEXEC), uintptr(mode), 0, 0)
	runtime.KeepAlive(p)
	if e == 0 {
		unix.Close(int(fd))
	}
	return e
}

// sockCall makes a bind or connect system call to 127.0.0.1:port on a new
// socket of type typ.
func sockCall(typ int, nr uintptr, port int) unix.Errno {
	s, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err.(unix.Errno)
	}
	defer unix.Close(s)
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	sa.Port = uint16(port>>8) | uint16(port&0xff)<<8 // network byte order
	_, _, e := unix.Syscall(nr, uintptr(s), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	runtime.KeepAlive(&sa)
	return e
}

func addPathRule(rulesetFD int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	return ll.LandlockAddPathBeneathRule(rulesetFD, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: fd}, 0)
}

// childReport is the line a refusal child prints on stdout.
type childReport struct {
	Case  string `json:"case"`
	Errno int    `json:"errno"` // what the call returned; 0 for success
}

// RefusalMain is the refusal child (LOCKSTEP_ROLE=proof-refusal): it
// restricts its thread to a domain handling only the case's right, with
// logging of new execs on, makes the refused call on that thread, prints a
// childReport and exits 0 when the call failed as wanted, 1 when it did not,
// 2 when the domain could not be set up.
func RefusalMain() int {
	runtime.LockOSThread() // the domain is this thread's; never unlocked
	name, set := os.LookupEnv(envCase)
	if !set {
		fmt.Fprintf(os.Stderr, "lockstep: LOCKSTEP_ROLE=%s is set, but this process was not started by lockstep selftest (%s is not set): unset LOCKSTEP_ROLE\n", Role, envCase)
		return 2
	}
	sp, ok := specs[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "lockstep proof: unknown refusal %q\n", name)
		return 2
	}
	port, _ := strconv.Atoi(os.Getenv(envPort))
	fx := newFixture(os.Getenv(envDir), os.Getenv(envExe), port)
	fd, err := ll.LandlockCreateRuleset(&sp.attr, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lockstep proof: %s: create ruleset: %v\n", name, err)
		return 2
	}
	if sp.grant != nil {
		if err := sp.grant(fd, fx); err != nil {
			fmt.Fprintf(os.Stderr, "lockstep proof: %s: add rule: %v\n", name, err)
			return 2
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "lockstep proof: %s: no_new_privs: %v\n", name, err)
		return 2
	}
	var flags uint32
	if abi, _ := ll.LandlockGetABIVersion(); abi >= landlock.ABIAuditRecords {
		flags = landlock.RestrictLogNewExecOn
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		fmt.Fprintf(os.Stderr, "lockstep proof: %s: restrict self: %v\n", name, err)
		return 2
	}
	unix.Close(fd)
	e := sp.act(fx)
	out, _ := json.Marshal(childReport{Case: name, Errno: int(e)})
	os.Stdout.Write(append(out, '\n'))
	if e != sp.want {
		return 1
	}
	return 0
}
