package enforcer

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is assembled here rather than by a library such as
// go-seccomp-bpf, which was weighed for it: that library builds a filter
// for one audit architecture and gives every other (i386 on x86-64,
// AArch32 on arm64) its last group's action, so a 32-bit program would be
// either wholly refused or wholly unfiltered; it refuses x32 outright; and
// its Equal condition compares all 64 bits of an argument, which an ioctl
// request whose ignored high half is set walks round (the kernel reads
// the request as an unsigned int). It would also bring golang.org/x/net
// and syscall tables of a dozen architectures, kept as maps built at
// package init: measured with v1.6.0, 0.6 ms at the start of every
// process of a binary that imports it and 300 KB more binary, against
// 50 KB for zsysnum.go and this file. The program here is a
// binary search per architecture, a few hundred instructions; the
// kernel's action cache (Linux 5.11) skips the filter entirely for the
// allowed calls, whose verdict depends on the number alone, and works that
// out at install time by running the filter for every number, which a
// short path per number keeps cheap.

// SyscallRule is one entry of SyscallRules: the system call it refuses,
// the error the command gets instead, on which argument values, and why.
type SyscallRule struct {
	// Name is the call's name in the kernel's syscall tables (sysnums).
	Name string
	// Errno is what the call returns instead of running.
	Errno unix.Errno
	// Arg limits the rule to some argument values; the zero value is every
	// call.
	Arg ArgCondition
	// Reason says what the call would let the command do past the sandbox.
	Reason string
}

// ArgCondition compares the low 32 bits of one argument of a system call:
// the arguments filtered (an ioctl request, execveat's flags) are an
// unsigned int or an int to the kernel, which ignores the high half, so a
// filter must ignore it too. A condition with none of Equal, NotEqual and
// BitsSet matches every call; it has at most one of them.
type ArgCondition struct {
	Index    int      // the argument, 0 to 5
	Equal    []uint32 // matches when the argument is one of these
	NotEqual []uint32 // matches when the argument is none of these
	BitsSet  uint32   // matches when the argument has any of these bits
}

func (c ArgCondition) any() bool { return len(c.Equal) == 0 && len(c.NotEqual) == 0 && c.BitsSet == 0 }

func (c ArgCondition) kinds() int {
	n := 0
	for _, set := range []bool{len(c.Equal) > 0, len(c.NotEqual) > 0, c.BitsSet != 0} {
		if set {
			n++
		}
	}
	return n
}

// Console and keyboard ioctls of the kernel's virtual terminals
// (include/uapi/linux/kd.h and vt.h; handled in drivers/tty/vt/vt_ioctl.c
// and keyboard.c), and the filesystem freeze (include/uapi/linux/fs.h),
// which golang.org/x/sys/unix does not define.
const (
	kdKIOCSOUND       = 0x4B2F
	kdKDMKTONE        = 0x4B30
	kdKDSETLED        = 0x4B32
	kdKDADDIO         = 0x4B34
	kdKDDELIO         = 0x4B35
	kdKDENABIO        = 0x4B36
	kdKDDISABIO       = 0x4B37
	kdKDSETMODE       = 0x4B3A
	kdKDMAPDISP       = 0x4B3C
	kdKDUNMAPDISP     = 0x4B3D
	kdPIO_SCRNMAP     = 0x4B41
	kdKDSKBMODE       = 0x4B45
	kdKDSKBENT        = 0x4B47
	kdKDSKBSENT       = 0x4B49
	kdKDSKBDIACR      = 0x4B4B
	kdKDSETKEYCODE    = 0x4B4D
	kdKDSIGACCEPT     = 0x4B4E
	kdKDKBDREP        = 0x4B52
	kdPIO_FONT        = 0x4B61
	kdKDSKBMETA       = 0x4B63
	kdKDSKBLED        = 0x4B65
	kdPIO_UNIMAP      = 0x4B67
	kdPIO_UNIMAPCLR   = 0x4B68
	kdPIO_UNISCRNMAP  = 0x4B6A
	kdPIO_FONTX       = 0x4B6C
	kdPIO_FONTRESET   = 0x4B6D
	kdPIO_CMAP        = 0x4B71
	kdKDFONTOP        = 0x4B72
	kdKDSKBDIACRUC    = 0x4BFB
	vtVT_SETMODE      = 0x5602
	vtVT_RELDISP      = 0x5605
	vtVT_ACTIVATE     = 0x5606
	vtVT_DISALLOCATE  = 0x5608
	vtVT_RESIZE       = 0x5609
	vtVT_RESIZEX      = 0x560A
	vtVT_LOCKSWITCH   = 0x560B
	vtVT_UNLOCKSWITCH = 0x560C
	vtVT_SETACTIVATE  = 0x560F
	fsFIFREEZE        = 0xC0045877 // _IOWR('X', 119, int)
	fsFITHAW          = 0xC0045878 // _IOWR('X', 120, int)
)

// Reasons shared by several rules.
const (
	mountReason = "changes the mount tree: Landlock refuses mount, umount, remount, move_mount and pivot_root " +
		"to a sandboxed process, but not mount_setattr, which clears a mount's read-only flag, nor the " +
		"new mount API's detached mounts; no build mounts"
	keyReason = "the keyrings are the host's: a root command reads root's user keyring and plants keys " +
		"that outlive it (refused as in Docker's default profile)"
	droppedReason = "its capability is in DroppedCapabilities; refused here too, as in Docker's default " +
		"profile, so that no kernel path that skips the capability check is reached"
)

// SyscallRules are the system calls a sandboxed command may not make, for
// root and non-root alike: each reaches past Landlock (which checks paths,
// ports and scopes, not these) to the host or to what outlives the
// command. Every other call is allowed. Docker's default seccomp profile
// is the reference for what real builds tolerate; an entry is here only
// for a reason of its own. A call with several rules (ioctl) takes the
// first whose condition matches.
var SyscallRules = []SyscallRule{
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{unix.TIOCSTI, unix.TIOCLINUX}},
		"puts bytes into a terminal's input (TIOCLINUX: the console selection's paste), which the caller's " +
			"shell reads as typed and runs outside the sandbox; CAP_SYS_ADMIN skips the kernel's own checks"},
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{kdKDSKBENT, kdKDSKBSENT, kdKDSETKEYCODE,
		kdKDSKBDIACR, kdKDSKBDIACRUC, kdKDSKBMODE, kdKDSKBMETA, kdKDSKBLED, kdKDSETLED, kdKDKBDREP, kdKDSIGACCEPT}},
		"rebinds a virtual console's keys (a key that types a command, run outside the sandbox at the " +
			"user's next keystroke) or changes the keyboard for everyone; the change outlives the command"},
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{kdKDSETMODE, kdKDFONTOP, kdPIO_FONT, kdPIO_FONTX,
		kdPIO_FONTRESET, kdPIO_CMAP, kdPIO_SCRNMAP, kdPIO_UNISCRNMAP, kdPIO_UNIMAP, kdPIO_UNIMAPCLR, kdKIOCSOUND, kdKDMKTONE}},
		"changes a virtual console's screen (graphics mode blanks it; a font or map disguises what is " +
			"shown) or starts its beeper, beyond the command"},
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{vtVT_SETMODE, vtVT_ACTIVATE, vtVT_SETACTIVATE,
		vtVT_RELDISP, vtVT_RESIZE, vtVT_RESIZEX, vtVT_DISALLOCATE, vtVT_LOCKSWITCH, vtVT_UNLOCKSWITCH}},
		"switches the user's virtual console, takes over or locks console switching, resizes or frees consoles"},
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{kdKDADDIO, kdKDDELIO, kdKDENABIO, kdKDDISABIO,
		kdKDMAPDISP, kdKDUNMAPDISP}},
		"opens the video board's I/O ports or maps the display (legacy x86 console hardware access)"},
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{unix.TIOCSETD, unix.TIOCCONS, unix.TIOCVHANGUP}},
		"changes a terminal for every user of it: its line discipline (TIOCSETD), the kernel console's " +
			"output redirected to it (TIOCCONS), or a hang-up of the caller's session (TIOCVHANGUP)"},
	{"ioctl", unix.EPERM, ArgCondition{Index: 1, Equal: []uint32{fsFIFREEZE, fsFITHAW}},
		"freezes a whole filesystem (CAP_SYS_ADMIN, on any file of it): every writer on the host blocks"},
	{"clone3", unix.ENOSYS, ArgCondition{},
		"CLONE_INTO_CGROUP starts a child in any cgroup root may write, out of the containment cgroup and " +
			"its caps (Landlock checks neither the O_PATH open nor the clone); C libraries fall back to " +
			"clone(2) on ENOSYS, as under Docker's default profile"},
	{"execveat", unix.ENOSYS, ArgCondition{Index: 4, BitsSet: unix.AT_EMPTY_PATH},
		"executes an open descriptor (fexecve): Landlock does not check a file on an internal mount, so a " +
			"memfd holding any bytes ran without an [execute] grant; glibc's fexecve falls back on ENOSYS " +
			"to /proc/self/fd/N, where a regular file's path is checked"},
	{"prlimit64", unix.EPERM, ArgCondition{Index: 0, NotEqual: []uint32{0}},
		"sets or reads the limits of another process: Landlock has no hook for it, so a command changed " +
			"those of any process of its user outside the sandbox (RLIMIT_CPU 0 kills it); glibc, Go and " +
			"the JVM set their own with pid 0"},
	{"keyctl", unix.EPERM, ArgCondition{}, keyReason},
	{"add_key", unix.EPERM, ArgCondition{}, keyReason},
	{"request_key", unix.EPERM, ArgCondition{}, keyReason},
	{"perf_event_open", unix.EPERM, ArgCondition{},
		"an event with sigtrap sends SIGTRAP to processes outside the sandbox, round Landlock's signal " +
			"scope; with CAP_SYS_ADMIN it watches the whole machine (refused in Docker's default profile)"},
	{"fanotify_init", unix.EPERM, ArgCondition{},
		"a root command marks a whole mount or filesystem: it sees every file access on the host, and " +
			"permission events stall or refuse other processes' opens"},
	{"fanotify_mark", unix.EPERM, ArgCondition{}, "marks for fanotify_init's group (see fanotify_init)"},
	{"mount", unix.EPERM, ArgCondition{}, mountReason},
	{"umount", unix.EPERM, ArgCondition{}, mountReason},
	{"umount2", unix.EPERM, ArgCondition{}, mountReason},
	{"mount_setattr", unix.EPERM, ArgCondition{}, mountReason},
	{"open_tree", unix.EPERM, ArgCondition{}, mountReason},
	{"open_tree_attr", unix.EPERM, ArgCondition{}, mountReason},
	{"move_mount", unix.EPERM, ArgCondition{}, mountReason},
	{"fsopen", unix.EPERM, ArgCondition{}, mountReason},
	{"fsconfig", unix.EPERM, ArgCondition{}, mountReason},
	{"fsmount", unix.EPERM, ArgCondition{}, mountReason},
	{"fspick", unix.EPERM, ArgCondition{}, mountReason},
	{"pivot_root", unix.EPERM, ArgCondition{}, mountReason},
	{"setns", unix.EPERM, ArgCondition{},
		"joins another namespace by descriptor: the host's mount namespace undoes the read-only mounts, " +
			"its UTS or IPC namespace the command's own; no build joins one (unshare stays: what it " +
			"creates holds no mount the command could change)"},
	{"sethostname", unix.EPERM, ArgCondition{},
		"renames the host when the command shares its UTS namespace (CAP_SYS_ADMIN)"},
	{"setdomainname", unix.EPERM, ArgCondition{}, "as sethostname, for the NIS domain name"},
	{"swapon", unix.EPERM, ArgCondition{}, "changes the host's swap (CAP_SYS_ADMIN)"},
	{"swapoff", unix.EPERM, ArgCondition{}, "changes the host's swap (CAP_SYS_ADMIN)"},
	{"quotactl", unix.EPERM, ArgCondition{}, "changes a filesystem's quotas for every user (CAP_SYS_ADMIN)"},
	{"quotactl_fd", unix.EPERM, ArgCondition{}, "as quotactl, by descriptor"},
	{"bpf", unix.EPERM, ArgCondition{},
		"with CAP_SYS_ADMIN loads programs that trace and read the host (CAP_BPF alone is dropped); " +
			"refused in Docker's default profile"},
	{"acct", unix.EPERM, ArgCondition{},
		"turns process accounting on for the whole host, written by every process to a file of the " +
			"command's choosing (CAP_SYS_PACCT)"},
	{"syslog", unix.EPERM, ArgCondition{},
		"reads the kernel log, the host's, which Landlock guards as /dev/kmsg but not as syslog(2) " +
			"(open to every user while kernel.dmesg_restrict is 0)"},
	{"vhangup", unix.EPERM, ArgCondition{},
		"hangs up the controlling terminal, the caller's in an interactive run: its shell gets SIGHUP"},
	{"open_by_handle_at", unix.EPERM, ArgCondition{},
		"opens a file by handle with no path walk (CAP_DAC_READ_SEARCH; the container escape known as " +
			"Shocker); no build opens files by handle"},
	{"init_module", unix.EPERM, ArgCondition{}, droppedReason},
	{"finit_module", unix.EPERM, ArgCondition{}, droppedReason},
	{"delete_module", unix.EPERM, ArgCondition{}, droppedReason},
	{"kexec_load", unix.EPERM, ArgCondition{}, droppedReason},
	{"kexec_file_load", unix.EPERM, ArgCondition{}, droppedReason},
	{"reboot", unix.EPERM, ArgCondition{}, droppedReason},
	{"settimeofday", unix.EPERM, ArgCondition{}, droppedReason},
	{"clock_settime", unix.EPERM, ArgCondition{}, droppedReason},
	{"stime", unix.EPERM, ArgCondition{}, droppedReason},
	{"ioperm", unix.EPERM, ArgCondition{}, droppedReason},
	{"iopl", unix.EPERM, ArgCondition{}, droppedReason},
}

// convention is a system call numbering: a column of sysnums.
type convention int

const (
	convX86_64 convention = iota
	convX32
	convI386
	convAArch64
	convARM
	numConventions
)

// sysnum is a row of sysnums (zsysnum.go, generated from the kernel's
// syscall tables by enforcer/internal/mksysnum).
type sysnum struct {
	name string
	nr   [numConventions]int32
}

// sysnumOf returns name's row, or false if the tables have no such call.
func sysnumOf(name string) (sysnum, bool) {
	i := sort.Search(len(sysnums), func(i int) bool { return sysnums[i].name >= name })
	if i < len(sysnums) && sysnums[i].name == name {
		return sysnums[i], true
	}
	return sysnum{}, false
}

// numbering is a convention as a filter sees it: the numbers of one
// column, with bits or'ed in (x32's).
type numbering struct {
	conv convention
	bits uint32
}

// syscallABI is one audit architecture a process of this GOARCH may make
// system calls in, and the numberings the kernel accepts there. A 64-bit
// kernel also runs 32-bit code (int 0x80 on x86-64, AArch32 on arm64),
// whose calls have other numbers: a filter that knew only the native ones
// would be walked round.
type syscallABI struct {
	audit     uint32
	numbering []numbering
}

// x32Bit marks a system call of the x32 ABI (native audit architecture).
const x32Bit = 0x40000000

// syscallABIs lists them per GOARCH, the native convention first. x32's
// own numbers and the x86-64 ones with the x32 bit are both filtered: the
// kernel refuses a 64-bit-only number with the bit set, and the filter
// does not count on it.
var syscallABIs = map[string][]syscallABI{
	"amd64": {
		{unix.AUDIT_ARCH_X86_64, []numbering{{convX86_64, 0}, {convX32, x32Bit}, {convX86_64, x32Bit}}},
		{unix.AUDIT_ARCH_I386, []numbering{{convI386, 0}}},
	},
	"arm64": {
		{unix.AUDIT_ARCH_AARCH64, []numbering{{convAArch64, 0}}},
		{unix.AUDIT_ARCH_ARM, []numbering{{convARM, 0}}},
	},
}

// numbers returns the distinct numbers of row's call in abi, in the order
// of its numberings.
func (abi syscallABI) numbers(row sysnum) []uint32 {
	out := make([]uint32, 0, len(abi.numbering))
	for _, n := range abi.numbering {
		if row.nr[n.conv] < 0 {
			continue
		}
		nr := uint32(row.nr[n.conv]) | n.bits
		if !slices.Contains(out, nr) {
			out = append(out, nr)
		}
	}
	return out
}

// Offsets into struct seccomp_data: nr, arch, then args[6] of 8 bytes each
// from 16; the low half of an argument is its first 4 bytes on the
// little-endian architectures of syscallABIs.
const (
	seccompNr               = 0
	seccompArch             = 4
	seccompArgs             = 16
	bpfLoadAbs              = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJumpIfEqual          = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJumpIfSet            = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfJumpIfGreaterOrEqual = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJump                 = unix.BPF_JMP | unix.BPF_JA
	bpfReturn               = unix.BPF_RET | unix.BPF_K
	seccompAllow            = unix.SECCOMP_RET_ALLOW
)

func seccompErrno(e unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA
}

// ruleGroup is the rules of one system call, in table order.
type ruleGroup struct {
	row   sysnum
	rules []SyscallRule
}

// groupRules gathers rules by system call, in the order of first mention,
// and checks each: a known name, an argument index, no rule after one that
// matches every call.
func groupRules(rules []SyscallRule) ([]ruleGroup, error) {
	var groups []ruleGroup
	at := map[string]int{}
	for _, r := range rules {
		row, ok := sysnumOf(r.Name)
		if !ok {
			return nil, fmt.Errorf("seccomp rule for %q: no such system call in the kernel's tables", r.Name)
		}
		if r.Arg.kinds() > 1 || len(r.Arg.NotEqual) > 250 {
			return nil, fmt.Errorf("seccomp rule for %s: more than one kind of condition, or too many values", r.Name)
		}
		if r.Arg.Index < 0 || r.Arg.Index > 5 {
			return nil, fmt.Errorf("seccomp rule for %s: argument %d (want 0 to 5)", r.Name, r.Arg.Index)
		}
		i, ok := at[r.Name]
		if !ok {
			i = len(groups)
			at[r.Name] = i
			groups = append(groups, ruleGroup{row: row})
		}
		if g := groups[i]; len(g.rules) > 0 && g.rules[len(g.rules)-1].Arg.any() {
			return nil, fmt.Errorf("seccomp rule for %s follows one that matches every call", r.Name)
		}
		groups[i].rules = append(groups[i].rules, r)
	}
	return groups, nil
}

// seccompFilter builds the program from rules for the audit architectures
// abis. Per architecture, a binary search over the refused numbers sends
// each to its verdict: an unconditional rule's errno at once, a
// conditional one's argument checks (shared by every numbering), which end
// in ALLOW. Every other number is allowed. A system call of an
// architecture not listed fails with ENOSYS (none exists on the
// architectures listed). Conditional jumps skip only what follows them
// closely; longer ones are BPF_JA, whose 32-bit offset any program length
// fits.
func seccompFilter(rules []SyscallRule, abis []syscallABI) ([]unix.SockFilter, error) {
	if len(abis) == 0 {
		return nil, fmt.Errorf("no seccomp table for %s: the system call filter cannot be built", runtime.GOARCH)
	}
	groups, err := groupRules(rules)
	if err != nil {
		return nil, err
	}
	// Labels: one per architecture, then one per group's argument checks.
	a := assembler{prog: make([]asmInsn, 0, 512)}
	abiLabel := 0
	for range abis {
		a.newLabel()
	}
	a.argsLabel = len(a.labels)
	argsLabel := a.argsLabel
	for range groups {
		a.newLabel()
	}
	a.op(bpfLoadAbs, seccompArch)
	for i, abi := range abis {
		a.op(bpfJumpIfEqual, abi.audit).jf = 1
		a.jump(abiLabel + i)
	}
	a.op(bpfReturn, seccompErrno(unix.ENOSYS))
	for i, abi := range abis {
		a.label(abiLabel + i)
		a.op(bpfLoadAbs, seccompNr)
		var refused []refusedNr
		for gi, g := range groups {
			for _, nr := range abi.numbers(g.row) {
				refused = append(refused, refusedNr{nr, gi})
			}
		}
		sort.Slice(refused, func(i, j int) bool { return refused[i].nr < refused[j].nr })
		a.search(refused, groups)
	}
	for gi, g := range groups {
		if g.rules[0].Arg.any() {
			continue
		}
		a.label(argsLabel + gi)
		a.argChecks(g.rules)
	}
	return a.assemble()
}

// argChecks emits one group's argument checks: each rule's condition
// returns its errno, and a call no rule's condition matches is allowed.
// An unconditional rule ends the group.
func (a *assembler) argChecks(rules []SyscallRule) {
	for _, r := range rules {
		if r.Arg.any() {
			a.op(bpfReturn, seccompErrno(r.Errno))
			return
		}
		a.op(bpfLoadAbs, uint32(seccompArgs+8*r.Arg.Index))
		for _, v := range r.Arg.Equal {
			a.op(bpfJumpIfEqual, v).jf = 1
			a.op(bpfReturn, seccompErrno(r.Errno))
		}
		if r.Arg.BitsSet != 0 {
			a.op(bpfJumpIfSet, r.Arg.BitsSet).jf = 1
			a.op(bpfReturn, seccompErrno(r.Errno))
		}
		if n := len(r.Arg.NotEqual); n > 0 {
			// A value in the set skips the rest of the set and the return.
			for i, v := range r.Arg.NotEqual {
				a.op(bpfJumpIfEqual, v).jt = uint8(n - i)
			}
			a.op(bpfReturn, seccompErrno(r.Errno))
		}
	}
	a.op(bpfReturn, seccompAllow)
}

// refusedNr is a refused system call's number in one architecture and
// its group's index.
type refusedNr struct {
	nr    uint32
	group int
}

// search emits a binary search over refused (sorted by number, in the
// accumulator): a number found goes to its group's verdict, any other is
// allowed. A few compares at the leaves are cheaper than more levels.
func (a *assembler) search(refused []refusedNr, groups []ruleGroup) {
	if len(refused) <= 4 {
		for _, r := range refused {
			a.op(bpfJumpIfEqual, r.nr).jf = 1
			if first := groups[r.group].rules[0]; first.Arg.any() {
				a.op(bpfReturn, seccompErrno(first.Errno))
			} else {
				a.jump(a.argsLabel + r.group)
			}
		}
		a.op(bpfReturn, seccompAllow)
		return
	}
	mid := len(refused) / 2
	upper := a.newLabel()
	a.op(bpfJumpIfGreaterOrEqual, refused[mid].nr).jf = 1
	a.jump(upper)
	a.search(refused[:mid], groups)
	a.label(upper)
	a.search(refused[mid:], groups)
}

// assembler collects instructions and resolves BPF_JA targets by label.
type assembler struct {
	prog      []asmInsn
	labels    []int // instruction index of each label, -1 until placed
	argsLabel int   // the label of group 0's argument checks; group i's is argsLabel+i
}

type asmInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
	target int // a BPF_JA's label + 1; 0 for any other instruction
}

func (a *assembler) op(code uint16, k uint32) *asmInsn {
	a.prog = append(a.prog, asmInsn{code: code, k: k})
	return &a.prog[len(a.prog)-1]
}

// newLabel returns a label not yet placed.
func (a *assembler) newLabel() int {
	a.labels = append(a.labels, -1)
	return len(a.labels) - 1
}

func (a *assembler) jump(label int) {
	a.prog = append(a.prog, asmInsn{code: bpfJump, target: label + 1})
}

func (a *assembler) label(label int) {
	a.labels[label] = len(a.prog)
}

func (a *assembler) assemble() ([]unix.SockFilter, error) {
	if len(a.prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp program of %d instructions, more than the kernel's %d", len(a.prog), unix.BPF_MAXINSNS)
	}
	out := make([]unix.SockFilter, len(a.prog))
	for i, in := range a.prog {
		out[i] = unix.SockFilter{Code: in.code, Jt: in.jt, Jf: in.jf, K: in.k}
		if in.target == 0 {
			continue
		}
		to := a.labels[in.target-1]
		if to <= i {
			return nil, fmt.Errorf("seccomp jump to label %d: not placed after instruction %d", in.target-1, i)
		}
		out[i].K = uint32(to - (i + 1))
	}
	return out, nil
}

// installSeccompFilter installs the filter of SyscallRules on the calling
// thread (no TSYNC: only the thread that then execs the command, in the
// enforcer child or with --exec, gets it). It needs no_new_privs, which
// restrictSelf set.
func installSeccompFilter() error {
	prog, err := seccompFilter(SyscallRules, syscallABIs[runtime.GOARCH])
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install the seccomp filter of enforcer.SyscallRules: %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}
