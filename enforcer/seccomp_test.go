package enforcer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// runBPF interprets the classic-BPF subset seccompFilter emits over one
// struct seccomp_data (little-endian), returning the filter's verdict.
func runBPF(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLoadAbs:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case bpfJumpIfEqual:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfJumpIfSet:
			if acc&in.K != 0 {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfJumpIfGreaterOrEqual:
			if acc >= in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfJump:
			pc += int(in.K)
		case bpfReturn:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x not interpreted", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[seccompNr:], nr)
	binary.LittleEndian.PutUint32(b[seccompArch:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(b[seccompArgs+8*i:], a)
	}
	return b
}

// argsWith returns six arguments, all set to fill except index i, v.
func argsWith(i int, v, fill uint64) []uint64 {
	a := []uint64{fill, fill, fill, fill, fill, fill}
	a[i] = v
	return a
}

// TestTerminalFilter: the filter refuses TIOCSTI and TIOCLINUX through every
// calling convention of each architecture (32-bit compat and x32 included),
// with the request's ignored high bits set too, and allows other ioctls and
// other system calls.
func TestTerminalFilter(t *testing.T) {
	deny, allow := seccompErrno(unix.EPERM), uint32(seccompAllow)
	ioctl, _ := sysnumOf("ioctl")
	clone3, _ := sysnumOf("clone3")
	getpid, _ := sysnumOf("getpid")
	for goarch, abis := range syscallABIs {
		prog, err := seccompFilter(SyscallRules, abis)
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		for _, a := range abis {
			for _, nr := range a.numbers(ioctl) {
				for _, tc := range []struct {
					arg1 uint64
					want uint32
				}{
					{unix.TIOCSTI, deny},
					{unix.TIOCLINUX, deny},
					{1<<32 | unix.TIOCSTI, deny},
					{0xffffffff<<32 | unix.TIOCLINUX, deny},
					{unix.TCGETS, allow},
					{unix.TIOCGWINSZ, allow},
					{unix.TIOCSTI + 1<<8, allow},
				} {
					if got := runBPF(t, prog, seccompData(a.audit, nr, 0, tc.arg1)); got != tc.want {
						t.Errorf("%s arch %#x ioctl nr %#x request %#x: verdict %#x, want %#x", goarch, a.audit, nr, tc.arg1, got, tc.want)
					}
				}
			}
			if len(a.numbers(clone3)) == 0 {
				t.Errorf("%s arch %#x: clone3 not filtered", goarch, a.audit)
			}
			for _, nr := range a.numbers(clone3) {
				if got := runBPF(t, prog, seccompData(a.audit, nr)); got != seccompErrno(unix.ENOSYS) {
					t.Errorf("%s arch %#x clone3 nr %#x: verdict %#x, want ENOSYS", goarch, a.audit, nr, got)
				}
			}
			// Another system call with a TIOCSTI-looking argument passes.
			for _, nr := range a.numbers(getpid) {
				if got := runBPF(t, prog, seccompData(a.audit, nr, 0, unix.TIOCSTI)); got != allow {
					t.Errorf("%s arch %#x getpid: verdict %#x, want allow", goarch, a.audit, got)
				}
			}
		}
		if got := runBPF(t, prog, seccompData(0x1234, 16, 0, unix.TIOCSTI)); got != seccompErrno(unix.ENOSYS) {
			t.Errorf("%s unknown arch: verdict %#x, want ENOSYS", goarch, got)
		}
	}
	if _, ok := syscallABIs[runtime.GOARCH]; !ok {
		t.Errorf("no seccomp table for %s: lockstep run refuses every command there", runtime.GOARCH)
	}
}

// TestSeccompRulesEveryConvention runs the program of every architecture
// over every system call of the kernel's tables in every numbering: a call
// of SyscallRules gets its rule's errno where its condition matches (the
// argument's high half set or not) and passes where it does not; every
// other call passes, whatever its arguments.
func TestSeccompRulesEveryConvention(t *testing.T) {
	groups, err := groupRules(SyscallRules)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ruleGroup{}
	for _, g := range groups {
		byName[g.row.name] = g
	}
	for goarch, abis := range syscallABIs {
		prog, err := seccompFilter(SyscallRules, abis)
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		t.Logf("%s: %d instructions", goarch, len(prog))
		filtered := map[string]bool{}
		for _, a := range abis {
			for _, row := range sysnums {
				g, refused := byName[row.name]
				for _, nr := range a.numbers(row) {
					check := func(args []uint64, want uint32, what string) {
						t.Helper()
						if got := runBPF(t, prog, seccompData(a.audit, nr, args...)); got != want {
							t.Errorf("%s arch %#x %s (nr %#x) %s: verdict %#x, want %#x", goarch, a.audit, row.name, nr, what, got, want)
						}
					}
					if !refused {
						check(argsWith(0, 0, 0), seccompAllow, "zero arguments")
						check(argsWith(0, ^uint64(0), ^uint64(0)), seccompAllow, "all-ones arguments")
						continue
					}
					filtered[row.name] = true
					for _, r := range g.rules {
						switch {
						case r.Arg.any():
							check(argsWith(0, 0, 0), seccompErrno(r.Errno), "any arguments")
						case len(r.Arg.NotEqual) > 0:
							for _, v := range r.Arg.NotEqual {
								check(argsWith(r.Arg.Index, uint64(v), 0), seccompAllow, fmt.Sprintf("arg%d=%#x", r.Arg.Index, v))
								check(argsWith(r.Arg.Index, 0xffffffff<<32|uint64(v), 0), seccompAllow, fmt.Sprintf("arg%d=%#x, high half set", r.Arg.Index, v))
								check(argsWith(r.Arg.Index, uint64(v+1), 0), seccompErrno(r.Errno), fmt.Sprintf("arg%d=%#x", r.Arg.Index, v+1))
							}
						case r.Arg.BitsSet != 0:
							check(argsWith(r.Arg.Index, uint64(r.Arg.BitsSet), 0), seccompErrno(r.Errno), "bits set")
							check(argsWith(r.Arg.Index, 0xffffffff<<32|uint64(r.Arg.BitsSet), 0), seccompErrno(r.Errno), "bits set, high half set")
							check(argsWith(r.Arg.Index, uint64(^r.Arg.BitsSet), 0), seccompAllow, "bits clear")
						default:
							for _, v := range r.Arg.Equal {
								check(argsWith(r.Arg.Index, uint64(v), 0), seccompErrno(r.Errno), fmt.Sprintf("arg%d=%#x", r.Arg.Index, v))
								check(argsWith(r.Arg.Index, 1<<40|uint64(v), 0), seccompErrno(r.Errno), fmt.Sprintf("arg%d=%#x, high half set", r.Arg.Index, v))
							}
						}
					}
					if g.rules[0].Arg.Equal != nil {
						check(argsWith(g.rules[0].Arg.Index, unix.TCGETS, 0), seccompAllow, "an allowed value")
					}
				}
			}
		}
		// A rule may name a call some architecture lacks (stime is
		// i386's), but each must be filtered somewhere.
		for name := range byName {
			if !filtered[name] && goarch == "amd64" {
				t.Errorf("%s: %s is in SyscallRules but in none of its conventions", goarch, name)
			}
		}
	}
}

// TestSyscallRulesAreWhole: every rule gives a reason and an errno, and the
// table holds what the sandbox relies on.
func TestSyscallRulesAreWhole(t *testing.T) {
	for _, r := range SyscallRules {
		if r.Reason == "" || r.Errno == 0 {
			t.Errorf("rule for %s: reason %q, errno %d", r.Name, r.Reason, r.Errno)
		}
	}
	for _, name := range []string{"prlimit64", "keyctl", "add_key", "request_key", "perf_event_open", "fanotify_init", "mount_setattr", "setns", "execveat", "clone3"} {
		if _, err := groupRules([]SyscallRule{{Name: name}}); err != nil {
			t.Error(err)
		}
		found := false
		for _, r := range SyscallRules {
			found = found || r.Name == name
		}
		if !found {
			t.Errorf("%s is not refused", name)
		}
	}
	if _, err := groupRules([]SyscallRule{{Name: "no_such_call"}}); err == nil {
		t.Error("a rule for an unknown call was accepted")
	}
	if _, err := groupRules([]SyscallRule{{Name: "ioctl"}, {Name: "ioctl", Arg: ArgCondition{Index: 1, Equal: []uint32{1}}}}); err == nil {
		t.Error("a rule after one that matches every call was accepted")
	}
}

// headerDefines reads `#define PREFIXname value` lines of a C header.
func headerDefines(t *testing.T, path, prefix string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("no kernel header to compare with: %v", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[0] == "#define" && strings.HasPrefix(fields[1], prefix) {
			out[strings.TrimPrefix(fields[1], prefix)] = strings.Join(fields[2:], " ")
		}
	}
	return out
}

// TestSysnumsMatchKernelHeaders checks the generated numbers against the
// installed kernel headers (linux-libc-dev, generated from the same kernel
// tables) for every call both know, and the native column against
// golang.org/x/sys/unix.
func TestSysnumsMatchKernelHeaders(t *testing.T) {
	const dir = "/usr/include/x86_64-linux-gnu/asm/"
	for _, h := range []struct {
		file string
		conv convention
	}{{"unistd_64.h", convX86_64}, {"unistd_32.h", convI386}, {"unistd_x32.h", convX32}} {
		defs := headerDefines(t, dir+h.file, "__NR_")
		compared := 0
		for name, v := range defs {
			v = strings.TrimSuffix(strings.TrimPrefix(v, "(__X32_SYSCALL_BIT + "), ")")
			n, err := strconv.Atoi(v)
			if err != nil {
				continue
			}
			row, ok := sysnumOf(name)
			if !ok {
				t.Errorf("%s: %s is not in sysnums", h.file, name)
				continue
			}
			compared++
			if int(row.nr[h.conv]) != n {
				t.Errorf("%s: %s is %d, sysnums says %d", h.file, name, n, row.nr[h.conv])
			}
		}
		if compared < 300 {
			t.Errorf("%s: only %d calls compared", h.file, compared)
		}
	}
	native := map[string]convention{"amd64": convX86_64, "arm64": convAArch64}[runtime.GOARCH]
	for name, nr := range map[string]uintptr{"ioctl": unix.SYS_IOCTL, "execveat": unix.SYS_EXECVEAT, "keyctl": unix.SYS_KEYCTL,
		"perf_event_open": unix.SYS_PERF_EVENT_OPEN, "mount": unix.SYS_MOUNT, "setns": unix.SYS_SETNS, "bpf": unix.SYS_BPF} {
		if row, _ := sysnumOf(name); uintptr(row.nr[native]) != nr {
			t.Errorf("%s: sysnums says %d, x/sys/unix %d", name, row.nr[native], nr)
		}
	}
}

// TestConsoleIoctlNumbers checks the console ioctl constants against the
// installed kernel headers.
func TestConsoleIoctlNumbers(t *testing.T) {
	defs := headerDefines(t, "/usr/include/linux/kd.h", "")
	for name, v := range headerDefines(t, "/usr/include/linux/vt.h", "") {
		defs[name] = v
	}
	for name, want := range map[string]uint32{
		"KIOCSOUND": kdKIOCSOUND, "KDMKTONE": kdKDMKTONE, "KDSETLED": kdKDSETLED, "KDADDIO": kdKDADDIO, "KDDELIO": kdKDDELIO,
		"KDENABIO": kdKDENABIO, "KDDISABIO": kdKDDISABIO, "KDSETMODE": kdKDSETMODE, "KDMAPDISP": kdKDMAPDISP,
		"KDUNMAPDISP": kdKDUNMAPDISP, "PIO_SCRNMAP": kdPIO_SCRNMAP, "KDSKBMODE": kdKDSKBMODE, "KDSKBENT": kdKDSKBENT,
		"KDSKBSENT": kdKDSKBSENT, "KDSKBDIACR": kdKDSKBDIACR, "KDSETKEYCODE": kdKDSETKEYCODE, "KDSIGACCEPT": kdKDSIGACCEPT,
		"KDKBDREP": kdKDKBDREP, "PIO_FONT": kdPIO_FONT, "KDSKBMETA": kdKDSKBMETA, "KDSKBLED": kdKDSKBLED,
		"PIO_UNIMAP": kdPIO_UNIMAP, "PIO_UNIMAPCLR": kdPIO_UNIMAPCLR, "PIO_UNISCRNMAP": kdPIO_UNISCRNMAP,
		"PIO_FONTX": kdPIO_FONTX, "PIO_FONTRESET": kdPIO_FONTRESET, "PIO_CMAP": kdPIO_CMAP, "KDFONTOP": kdKDFONTOP,
		"KDSKBDIACRUC": kdKDSKBDIACRUC, "VT_SETMODE": vtVT_SETMODE, "VT_RELDISP": vtVT_RELDISP, "VT_ACTIVATE": vtVT_ACTIVATE,
		"VT_DISALLOCATE": vtVT_DISALLOCATE, "VT_RESIZE": vtVT_RESIZE, "VT_RESIZEX": vtVT_RESIZEX,
		"VT_LOCKSWITCH": vtVT_LOCKSWITCH, "VT_UNLOCKSWITCH": vtVT_UNLOCKSWITCH, "VT_SETACTIVATE": vtVT_SETACTIVATE,
	} {
		s, ok := defs[name]
		if !ok {
			t.Errorf("%s: not in the headers", name)
			continue
		}
		got, err := strconv.ParseUint(strings.Fields(s)[0], 0, 32)
		if err != nil || uint32(got) != want {
			t.Errorf("%s: header %q, lockstep %#x", name, s, want)
		}
	}
}

// filterCase is a system call made raw, with arguments the kernel answers
// harmlessly when nothing filters them.
type filterCase struct {
	name string
	nr   uintptr
	args [6]uintptr
	want unix.Errno // under the filter; 0: allowed
}

func filterCases(t *testing.T, pty int) []filterCase {
	cstr := func(s string) uintptr {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			t.Fatal(err)
		}
		return uintptr(unsafe.Pointer(p))
	}
	var winsize unix.Winsize
	var rlim unix.Rlimit
	perfAttr := unix.PerfEventAttr{Type: 0xffff, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))} // no such PMU
	return []filterCase{
		{"ioctl TIOCSTI", unix.SYS_IOCTL, [6]uintptr{uintptr(pty), unix.TIOCSTI, cstr("x")}, unix.EPERM},
		{"ioctl KDSKBENT", unix.SYS_IOCTL, [6]uintptr{uintptr(pty), kdKDSKBENT, cstr("xxxx")}, unix.EPERM},
		{"ioctl KDSKBSENT", unix.SYS_IOCTL, [6]uintptr{uintptr(pty), kdKDSKBSENT, cstr("xxxx")}, unix.EPERM},
		{"ioctl VT_ACTIVATE", unix.SYS_IOCTL, [6]uintptr{uintptr(pty), vtVT_ACTIVATE, 0}, unix.EPERM},
		{"ioctl TIOCSETD", unix.SYS_IOCTL, [6]uintptr{uintptr(pty), unix.TIOCSETD, 0}, unix.EPERM},
		{"ioctl TIOCGWINSZ", unix.SYS_IOCTL, [6]uintptr{uintptr(pty), unix.TIOCGWINSZ, uintptr(unsafe.Pointer(&winsize))}, 0},
		{"keyctl", unix.SYS_KEYCTL, [6]uintptr{unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffc) /* KEY_SPEC_USER_KEYRING */, 0}, unix.EPERM},
		{"add_key", unix.SYS_ADD_KEY, [6]uintptr{cstr("lockstep-no-such-type"), cstr("x"), 0, 0, uintptr(0xfffffffe)}, unix.EPERM},
		{"request_key", unix.SYS_REQUEST_KEY, [6]uintptr{cstr("user"), cstr("lockstep-no-such-key"), 0, 0}, unix.EPERM},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{uintptr(unsafe.Pointer(&perfAttr)), 0, ^uintptr(0), ^uintptr(0), 0}, unix.EPERM},
		{"fanotify_init", unix.SYS_FANOTIFY_INIT, [6]uintptr{0xffffffff, 0}, unix.EPERM},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uintptr{^uintptr(0), cstr(""), unix.AT_EMPTY_PATH, 0, 0}, unix.EPERM},
		{"fsopen", unix.SYS_FSOPEN, [6]uintptr{cstr("lockstep-no-such-fs"), 0}, unix.EPERM},
		{"setns", unix.SYS_SETNS, [6]uintptr{^uintptr(0), 0}, unix.EPERM},
		{"bpf", unix.SYS_BPF, [6]uintptr{0xffff, 0, 0}, unix.EPERM},
		{"syslog", unix.SYS_SYSLOG, [6]uintptr{10 /* SYSLOG_ACTION_SIZE_BUFFER */, 0, 0}, unix.EPERM},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, [6]uintptr{^uintptr(0), 0, 0}, unix.EPERM},
		{"execveat AT_EMPTY_PATH", unix.SYS_EXECVEAT, [6]uintptr{^uintptr(0), cstr(""), 0, 0, unix.AT_EMPTY_PATH}, unix.ENOSYS},
		{"execveat by path", unix.SYS_EXECVEAT, [6]uintptr{^uintptr(0), cstr("lockstep-no-such-file"), 0, 0, 0}, 0},
		{"prlimit64 of pid 1", unix.SYS_PRLIMIT64, [6]uintptr{1, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&rlim))}, unix.EPERM},
		{"prlimit64 of itself", unix.SYS_PRLIMIT64, [6]uintptr{0, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&rlim))}, 0},
		{"getpid", unix.SYS_GETPID, [6]uintptr{}, 0},
	}
}

// rawErrnos makes each case's call on a thread of its own and returns the
// errnos; with filter, the thread first sets no_new_privs and installs the
// filter (the thread is locked and left to die with its goroutine).
func rawErrnos(t *testing.T, cases []filterCase, filter bool) []unix.Errno {
	t.Helper()
	type result struct {
		errnos []unix.Errno
		err    error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked when filtered
		if filter {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				done <- result{err: err}
				return
			}
			if err := installSeccompFilter(); err != nil {
				done <- result{err: err}
				return
			}
		}
		var out []unix.Errno
		for _, c := range cases {
			_, _, e := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
			out = append(out, e)
		}
		if !filter {
			runtime.UnlockOSThread()
		}
		done <- result{errnos: out}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.errnos
}

// TestFilterRefuses installs the filter on a thread and makes real system
// calls there: each refused one fails with its rule's errno, and the same
// call on an unfiltered thread got another answer from the kernel (so the
// errno is the filter's); the allowed ones answer as unfiltered.
func TestFilterRefuses(t *testing.T) {
	pty, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pty)
	cases := filterCases(t, pty)
	plain := rawErrnos(t, cases, false)
	filtered := rawErrnos(t, cases, true)
	for i, c := range cases {
		t.Logf("%s: unfiltered %v, filtered %v", c.name, errnoText(plain[i]), errnoText(filtered[i]))
		switch {
		case c.want == 0 && filtered[i] != plain[i]:
			t.Errorf("%s under the filter: %v; unfiltered %v (want the same)", c.name, filtered[i], plain[i])
		case c.want != 0 && filtered[i] != c.want:
			t.Errorf("%s under the filter: %v; want %v (unfiltered: %v)", c.name, errnoText(filtered[i]), c.want, errnoText(plain[i]))
		case c.want != 0 && plain[i] == c.want:
			t.Errorf("%s unfiltered already fails with %v: the case shows nothing", c.name, c.want)
		}
	}
}

func errnoText(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return e.Error()
}

// TestTerminalFilterInstalls: the filter loads into the kernel on a thread
// with no_new_privs (a locked thread, which the test leaves to die) and
// then refuses TIOCSTI on a real pty with EPERM, while TCGETS still works.
func TestTerminalFilterInstalls(t *testing.T) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(m)
	errc := make(chan [2]error)
	go func() {
		runtime.LockOSThread() // never unlocked: the filtered thread dies with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- [2]error{err, nil}
			return
		}
		if err := installSeccompFilter(); err != nil {
			errc <- [2]error{err, nil}
			return
		}
		c := byte('x')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		_, getErr := unix.IoctlGetTermios(m, unix.TCGETS)
		errc <- [2]error{e, getErr}
	}()
	got := <-errc
	if got[0] != unix.EPERM || got[1] != nil {
		t.Errorf("under the filter: TIOCSTI %v (want EPERM), TCGETS %v (want nil)", got[0], got[1])
	}
}

// BenchmarkSeccompFilter measures building the program, which the child
// does on every run before installing it.
func BenchmarkSeccompFilter(b *testing.B) {
	abis := syscallABIs[runtime.GOARCH]
	for b.Loop() {
		if _, err := seccompFilter(SyscallRules, abis); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRunDocNamesEveryRefusedCall: docs/run.md's table of the filter names
// every system call of SyscallRules.
func TestRunDocNamesEveryRefusedCall(t *testing.T) {
	doc, err := os.ReadFile("../docs/run.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range SyscallRules {
		if !strings.Contains(string(doc), "`"+r.Name+"`") {
			t.Errorf("docs/run.md does not name `%s`", r.Name)
		}
	}
}
