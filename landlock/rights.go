package landlock

import (
	"strconv"
	"strings"
)

// Class is the kind of restriction a right belongs to: which ruleset mask
// holds its bit.
type Class uint8

// The classes: a filesystem right (handled_access_fs), a network right
// (handled_access_net), a scope (scoped), or an implicit restriction every
// domain has and no bit names (ptrace, fs.change_topology), which only the
// audit records mention.
const (
	ClassFS Class = iota + 1
	ClassNet
	ClassScope
	ClassImplicit
)

func (c Class) String() string {
	switch c {
	case ClassFS:
		return "fs"
	case ClassNet:
		return "net"
	case ClassScope:
		return "scope"
	case ClassImplicit:
		return "implicit"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Right names a Landlock access right, scope or implicit restriction as the
// kernel's audit records spell it in blockers= (security/landlock/audit.c).
// A refusal's rights compare directly with a record's blockers.
type Right string

// The rights, scopes and implicit restrictions Linux 7.2 writes, in the
// kernel's order.
const (
	Execute            Right = "fs.execute"
	WriteFile          Right = "fs.write_file"
	ReadFile           Right = "fs.read_file"
	ReadDir            Right = "fs.read_dir"
	RemoveDir          Right = "fs.remove_dir"
	RemoveFile         Right = "fs.remove_file"
	MakeChar           Right = "fs.make_char"
	MakeDir            Right = "fs.make_dir"
	MakeReg            Right = "fs.make_reg"
	MakeSock           Right = "fs.make_sock"
	MakeFifo           Right = "fs.make_fifo"
	MakeBlock          Right = "fs.make_block"
	MakeSym            Right = "fs.make_sym"
	Refer              Right = "fs.refer"
	Truncate           Right = "fs.truncate"
	IoctlDev           Right = "fs.ioctl_dev"
	ResolveUnix        Right = "fs.resolve_unix"
	BindTCP            Right = "net.bind_tcp"
	ConnectTCP         Right = "net.connect_tcp"
	BindUDP            Right = "net.bind_udp"
	ConnectSendUDP     Right = "net.connect_send_udp"
	AbstractUnixSocket Right = "scope.abstract_unix_socket"
	Signal             Right = "scope.signal"
	Ptrace             Right = "ptrace"
	ChangeTopology     Right = "fs.change_topology"
)

// Filesystem access rights (include/uapi/linux/landlock.h). They are
// written out, not taken from a library, so that this package stays a leaf
// that builds on any OS; the tests cross-check every one against
// golang.org/x/sys/unix and go-landlock.
const (
	FSExecute     uint64 = 1 << 0  // LANDLOCK_ACCESS_FS_EXECUTE
	FSWriteFile   uint64 = 1 << 1  // LANDLOCK_ACCESS_FS_WRITE_FILE
	FSReadFile    uint64 = 1 << 2  // LANDLOCK_ACCESS_FS_READ_FILE
	FSReadDir     uint64 = 1 << 3  // LANDLOCK_ACCESS_FS_READ_DIR
	FSRemoveDir   uint64 = 1 << 4  // LANDLOCK_ACCESS_FS_REMOVE_DIR
	FSRemoveFile  uint64 = 1 << 5  // LANDLOCK_ACCESS_FS_REMOVE_FILE
	FSMakeChar    uint64 = 1 << 6  // LANDLOCK_ACCESS_FS_MAKE_CHAR
	FSMakeDir     uint64 = 1 << 7  // LANDLOCK_ACCESS_FS_MAKE_DIR
	FSMakeReg     uint64 = 1 << 8  // LANDLOCK_ACCESS_FS_MAKE_REG
	FSMakeSock    uint64 = 1 << 9  // LANDLOCK_ACCESS_FS_MAKE_SOCK
	FSMakeFifo    uint64 = 1 << 10 // LANDLOCK_ACCESS_FS_MAKE_FIFO
	FSMakeBlock   uint64 = 1 << 11 // LANDLOCK_ACCESS_FS_MAKE_BLOCK
	FSMakeSym     uint64 = 1 << 12 // LANDLOCK_ACCESS_FS_MAKE_SYM
	FSRefer       uint64 = 1 << 13 // LANDLOCK_ACCESS_FS_REFER
	FSTruncate    uint64 = 1 << 14 // LANDLOCK_ACCESS_FS_TRUNCATE
	FSIoctlDev    uint64 = 1 << 15 // LANDLOCK_ACCESS_FS_IOCTL_DEV
	FSResolveUnix uint64 = 1 << 16 // LANDLOCK_ACCESS_FS_RESOLVE_UNIX
)

// Network access rights.
const (
	NetBindTCP        uint64 = 1 << 0 // LANDLOCK_ACCESS_NET_BIND_TCP
	NetConnectTCP     uint64 = 1 << 1 // LANDLOCK_ACCESS_NET_CONNECT_TCP
	NetBindUDP        uint64 = 1 << 2 // LANDLOCK_ACCESS_NET_BIND_UDP
	NetConnectSendUDP uint64 = 1 << 3 // LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP
)

// Scopes.
const (
	ScopeAbstractUnixSocket uint64 = 1 << 0 // LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	ScopeSignal             uint64 = 1 << 1 // LANDLOCK_SCOPE_SIGNAL
)

// The policy sections (.cfg headers) a right can be granted by. They are
// the grammar's (enforcer/policy), spelled here too so that this package
// stays a leaf; enforcer's tests check every one is a section the grammar
// knows.
const (
	secRead          = "read"
	secExecute       = "execute"
	secWrite         = "write"
	secCreate        = "create"
	secCreateIPC     = "create-ipc"
	secCreateSymlink = "create-symlink"
	secDelete        = "delete"
	secRestructure   = "restructure"
	secIoctl         = "ioctl"
	secConnect       = "connect"
	secBind          = "bind"
)

// Fact is everything lockstep knows about one right.
type Fact struct {
	Right Right
	Class Class
	// Bit is the right's bit in its class's mask; 0 for ClassImplicit.
	Bit uint64
	// ABI is the Landlock ABI version that introduced it.
	ABI int
	// Sections are the policy sections that grant it. The first is the one
	// a refusal of the right is charged to and an audit record's blocker
	// maps to; [restructure] also grants the make and remove rights a
	// rename needs. None: no policy grants it (make_char, make_block, the
	// scopes, the implicit restrictions).
	Sections []string
	// File marks a filesystem right that applies to a non-directory
	// (the kernel refuses the others in a rule on a file).
	File bool
	// Transport is "tcp" or "udp" for a network right.
	Transport string
}

// Rights lists every right, scope and implicit restriction, in the kernel's
// order (fs_access_strings, net_access_strings, get_blocker).
var Rights = []Fact{
	{Right: Execute, Class: ClassFS, Bit: FSExecute, ABI: ABIFirst, Sections: []string{secExecute}, File: true},
	{Right: WriteFile, Class: ClassFS, Bit: FSWriteFile, ABI: ABIFirst, Sections: []string{secWrite}, File: true},
	{Right: ReadFile, Class: ClassFS, Bit: FSReadFile, ABI: ABIFirst, Sections: []string{secRead}, File: true},
	{Right: ReadDir, Class: ClassFS, Bit: FSReadDir, ABI: ABIFirst, Sections: []string{secRead}},
	{Right: RemoveDir, Class: ClassFS, Bit: FSRemoveDir, ABI: ABIFirst, Sections: []string{secDelete, secRestructure}},
	{Right: RemoveFile, Class: ClassFS, Bit: FSRemoveFile, ABI: ABIFirst, Sections: []string{secDelete, secRestructure}},
	{Right: MakeChar, Class: ClassFS, Bit: FSMakeChar, ABI: ABIFirst},
	{Right: MakeDir, Class: ClassFS, Bit: FSMakeDir, ABI: ABIFirst, Sections: []string{secCreate, secRestructure}},
	{Right: MakeReg, Class: ClassFS, Bit: FSMakeReg, ABI: ABIFirst, Sections: []string{secCreate, secRestructure}},
	{Right: MakeSock, Class: ClassFS, Bit: FSMakeSock, ABI: ABIFirst, Sections: []string{secCreateIPC}},
	{Right: MakeFifo, Class: ClassFS, Bit: FSMakeFifo, ABI: ABIFirst, Sections: []string{secCreateIPC}},
	{Right: MakeBlock, Class: ClassFS, Bit: FSMakeBlock, ABI: ABIFirst},
	{Right: MakeSym, Class: ClassFS, Bit: FSMakeSym, ABI: ABIFirst, Sections: []string{secCreateSymlink}},
	{Right: Refer, Class: ClassFS, Bit: FSRefer, ABI: ABIRefer, Sections: []string{secRestructure}},
	{Right: Truncate, Class: ClassFS, Bit: FSTruncate, ABI: ABITruncate, Sections: []string{secWrite}, File: true},
	{Right: IoctlDev, Class: ClassFS, Bit: FSIoctlDev, ABI: ABIIoctlDev, Sections: []string{secIoctl}, File: true},
	{Right: ResolveUnix, Class: ClassFS, Bit: FSResolveUnix, ABI: ABIResolveUnix, Sections: []string{secRead}, File: true},
	{Right: BindTCP, Class: ClassNet, Bit: NetBindTCP, ABI: ABINetwork, Sections: []string{secBind}, Transport: "tcp"},
	{Right: ConnectTCP, Class: ClassNet, Bit: NetConnectTCP, ABI: ABINetwork, Sections: []string{secConnect}, Transport: "tcp"},
	{Right: BindUDP, Class: ClassNet, Bit: NetBindUDP, ABI: ABIUDP, Sections: []string{secBind}, Transport: "udp"},
	{Right: ConnectSendUDP, Class: ClassNet, Bit: NetConnectSendUDP, ABI: ABIUDP, Sections: []string{secConnect}, Transport: "udp"},
	{Right: AbstractUnixSocket, Class: ClassScope, Bit: ScopeAbstractUnixSocket, ABI: ABIScope},
	{Right: Signal, Class: ClassScope, Bit: ScopeSignal, ABI: ABIScope},
	{Right: Ptrace, Class: ClassImplicit, ABI: ABIFirst},
	{Right: ChangeTopology, Class: ClassImplicit, ABI: ABIFirst},
}

var byRight = func() map[Right]Fact {
	m := make(map[Right]Fact, len(Rights))
	for _, f := range Rights {
		m[f.Right] = f
	}
	return m
}()

// Lookup returns the fact of the right an audit record names; false for a
// name Linux 7.2 does not write (a newer kernel's right, or "unknown" after
// a kernel WARN).
func Lookup(name string) (Fact, bool) {
	f, ok := byRight[Right(name)]
	return f, ok
}

// fact returns r's row, the zero Fact for a name that is not a right.
func (r Right) fact() Fact { return byRight[r] }

// Class is the class of r (0 for a name that is not a right).
func (r Right) Class() Class { return r.fact().Class }

// Bit is r's bit in its class's mask.
func (r Right) Bit() uint64 { return r.fact().Bit }

// ABI is the Landlock ABI version that introduced r.
func (r Right) ABI() int { return r.fact().ABI }

// Section is the policy section a refusal of r is charged to, "" when no
// section grants r.
func (r Right) Section() string {
	if s := r.fact().Sections; len(s) > 0 {
		return s[0]
	}
	return ""
}

// Transport is "tcp" or "udp" for a network right, else "".
func (r Right) Transport() string { return r.fact().Transport }

// Name is r without its class prefix, in upper case, as the uapi header
// spells it after LANDLOCK_ACCESS_FS_, LANDLOCK_ACCESS_NET_ or
// LANDLOCK_SCOPE_: "READ_FILE", "BIND_TCP", "SIGNAL".
func (r Right) Name() string {
	_, name, _ := strings.Cut(string(r), ".")
	return strings.ToUpper(name)
}

// Mask is the union of the bits of every right of class c introduced
// by ABI abi or earlier.
func Mask(c Class, abi int) uint64 {
	var m uint64
	for _, f := range Rights {
		if f.Class == c && f.ABI <= abi {
			m |= f.Bit
		}
	}
	return m
}

// SectionMask is the union of the bits of the filesystem rights section
// grants.
func SectionMask(section string) uint64 {
	var m uint64
	for _, f := range Rights {
		for _, s := range f.Sections {
			if s == section && f.Class == ClassFS {
				m |= f.Bit
			}
		}
	}
	return m
}

// FileMask is the union of the filesystem rights that apply to a
// non-directory.
func FileMask() uint64 {
	var m uint64
	for _, f := range Rights {
		if f.File {
			m |= f.Bit
		}
	}
	return m
}

// Names spells the bits of mask v of class c with the uapi names, in bit
// order, joined by "|": "READ_FILE|READ_DIR"; "none" for no bit.
func Names(c Class, v uint64) string {
	var out []string
	for _, f := range Rights {
		if f.Class == c && v&f.Bit != 0 {
			out = append(out, f.Right.Name())
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "|")
}
