package enforcer

import (
	"fmt"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock filesystem access rights (include/uapi/linux/landlock.h). They are
// written out here, not taken from a library, so that the table below reads as
// the kernel documentation does; TestConstantsMatchUAPI cross-checks every one
// against golang.org/x/sys/unix and go-landlock's syscall package.
const (
	FSExecute     uint64 = 1 << 0  // LANDLOCK_ACCESS_FS_EXECUTE (V1+)
	FSWriteFile   uint64 = 1 << 1  // LANDLOCK_ACCESS_FS_WRITE_FILE (V1+)
	FSReadFile    uint64 = 1 << 2  // LANDLOCK_ACCESS_FS_READ_FILE (V1+)
	FSReadDir     uint64 = 1 << 3  // LANDLOCK_ACCESS_FS_READ_DIR (V1+)
	FSRemoveDir   uint64 = 1 << 4  // LANDLOCK_ACCESS_FS_REMOVE_DIR (V1+)
	FSRemoveFile  uint64 = 1 << 5  // LANDLOCK_ACCESS_FS_REMOVE_FILE (V1+)
	FSMakeChar    uint64 = 1 << 6  // LANDLOCK_ACCESS_FS_MAKE_CHAR (V1+)
	FSMakeDir     uint64 = 1 << 7  // LANDLOCK_ACCESS_FS_MAKE_DIR (V1+)
	FSMakeReg     uint64 = 1 << 8  // LANDLOCK_ACCESS_FS_MAKE_REG (V1+)
	FSMakeSock    uint64 = 1 << 9  // LANDLOCK_ACCESS_FS_MAKE_SOCK (V1+)
	FSMakeFifo    uint64 = 1 << 10 // LANDLOCK_ACCESS_FS_MAKE_FIFO (V1+)
	FSMakeBlock   uint64 = 1 << 11 // LANDLOCK_ACCESS_FS_MAKE_BLOCK (V1+)
	FSMakeSym     uint64 = 1 << 12 // LANDLOCK_ACCESS_FS_MAKE_SYM (V1+)
	FSRefer       uint64 = 1 << 13 // LANDLOCK_ACCESS_FS_REFER (V2+)
	FSTruncate    uint64 = 1 << 14 // LANDLOCK_ACCESS_FS_TRUNCATE (V3+)
	FSIoctlDev    uint64 = 1 << 15 // LANDLOCK_ACCESS_FS_IOCTL_DEV (V5+)
	FSResolveUnix uint64 = 1 << 16 // LANDLOCK_ACCESS_FS_RESOLVE_UNIX (V9+)
)

// Landlock network access rights.
const (
	NetBindTCP        uint64 = 1 << 0 // LANDLOCK_ACCESS_NET_BIND_TCP (V4+)
	NetConnectTCP     uint64 = 1 << 1 // LANDLOCK_ACCESS_NET_CONNECT_TCP (V4+)
	NetBindUDP        uint64 = 1 << 2 // LANDLOCK_ACCESS_NET_BIND_UDP (V10+)
	NetConnectSendUDP uint64 = 1 << 3 // LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP (V10+)
)

// Landlock scopes.
const (
	ScopeAbstractUnixSocket uint64 = 1 << 0 // LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (V6+)
	ScopeSignal             uint64 = 1 << 1 // LANDLOCK_SCOPE_SIGNAL (V6+)
)

// landlock_restrict_self flags.
const (
	RestrictLogSameExecOff   uint32 = 1 << 0 // LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF (V7+)
	RestrictLogNewExecOn     uint32 = 1 << 1 // LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (V7+)
	RestrictLogSubdomainsOff uint32 = 1 << 2 // LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF (V7+)
	RestrictTSync            uint32 = 1 << 3 // LANDLOCK_RESTRICT_SELF_TSYNC (V8+)
	RestrictNoNewPrivs       uint32 = 1 << 4 // LANDLOCK_RESTRICT_SELF_NO_NEW_PRIVS (V11+; no new right)
)

// ABIRow is what one Landlock ABI version can restrict. Each row is a
// superset of the one before it (TestABITableGrows).
type ABIRow struct {
	Version int
	// FS, Net and Scope are the access rights and scopes this ABI handles.
	FS, Net, Scope uint64
	// RestrictFlags are the landlock_restrict_self flags it accepts.
	RestrictFlags uint32
}

// ABITable is indexed by ABI version: ABITable[v].Version == v. Row 0 is "no
// Landlock". A kernel newer than the last row is treated as the last row, and
// the status line says that newer rights are not handled.
var ABITable = []ABIRow{
	{Version: 0},
	{Version: 1, FS: 1<<13 - 1},
	{Version: 2, FS: 1<<14 - 1},
	{Version: 3, FS: 1<<15 - 1},
	{Version: 4, FS: 1<<15 - 1, Net: NetBindTCP | NetConnectTCP},
	{Version: 5, FS: 1<<16 - 1, Net: NetBindTCP | NetConnectTCP},
	{Version: 6, FS: 1<<16 - 1, Net: NetBindTCP | NetConnectTCP, Scope: ScopeAbstractUnixSocket | ScopeSignal},
	{Version: 7, FS: 1<<16 - 1, Net: NetBindTCP | NetConnectTCP, Scope: ScopeAbstractUnixSocket | ScopeSignal,
		RestrictFlags: RestrictLogSameExecOff | RestrictLogNewExecOn | RestrictLogSubdomainsOff},
	{Version: 8, FS: 1<<16 - 1, Net: NetBindTCP | NetConnectTCP, Scope: ScopeAbstractUnixSocket | ScopeSignal,
		RestrictFlags: RestrictLogSameExecOff | RestrictLogNewExecOn | RestrictLogSubdomainsOff | RestrictTSync},
	{Version: 9, FS: 1<<17 - 1, Net: NetBindTCP | NetConnectTCP, Scope: ScopeAbstractUnixSocket | ScopeSignal,
		RestrictFlags: RestrictLogSameExecOff | RestrictLogNewExecOn | RestrictLogSubdomainsOff | RestrictTSync},
	{Version: 10, FS: 1<<17 - 1, Net: NetBindTCP | NetConnectTCP | NetBindUDP | NetConnectSendUDP, Scope: ScopeAbstractUnixSocket | ScopeSignal,
		RestrictFlags: RestrictLogSameExecOff | RestrictLogNewExecOn | RestrictLogSubdomainsOff | RestrictTSync},
	{Version: 11, FS: 1<<17 - 1, Net: NetBindTCP | NetConnectTCP | NetBindUDP | NetConnectSendUDP, Scope: ScopeAbstractUnixSocket | ScopeSignal,
		RestrictFlags: RestrictLogSameExecOff | RestrictLogNewExecOn | RestrictLogSubdomainsOff | RestrictTSync | RestrictNoNewPrivs},
}

// First ABI versions of the features the enforcer relies on.
const (
	ABIRefer       = 2
	ABITruncate    = 3
	ABINetwork     = 4
	ABIIoctlDev    = 5
	ABIScope       = 6
	ABILogFlags    = 7
	ABIResolveUnix = 9
	ABIUDP         = 10
)

// Gap is one kind of operation that a Landlock ABI without Bits does not
// restrict at all: on such a kernel the command may do it whatever the
// policy says (Landlock denies by default only what it handles). The first
// ABI that closes a gap is read from ABITable (Since), never written down
// twice.
type Gap struct {
	// Name is the token of the status line's unrestricted= field.
	Name string
	// What says what goes unrestricted, for messages and docs.
	What string
	// Class is the ABIRow set Bits belong to: "fs", "net" or "scope".
	Class string
	// Bits are the rights (or scopes) that close the gap, all of them.
	Bits uint64
}

// Gaps lists every gap an older ABI leaves, in the order the ABIs closed
// them. A right whose absence only refuses more (REFER below ABI 2: every
// cross-directory rename is refused) is not a gap.
var Gaps = []Gap{
	{Name: "truncate", Class: "fs", Bits: FSTruncate, What: "truncate(2) of any file, granted [write] or not"},
	{Name: "tcp", Class: "net", Bits: NetBindTCP | NetConnectTCP, What: "TCP bind and connect on any port"},
	{Name: "ioctl-dev", Class: "fs", Bits: FSIoctlDev, What: "every ioctl(2) on a device file it may open"},
	{Name: "abstract-unix", Class: "scope", Bits: ScopeAbstractUnixSocket, What: "connecting to abstract UNIX sockets of processes outside the sandbox"},
	{Name: "signal", Class: "scope", Bits: ScopeSignal, What: "signals to processes outside the sandbox"},
	{Name: "unix-connect", Class: "fs", Bits: FSResolveUnix, What: "connect(2) or sendmsg(2) to a pathname UNIX socket anywhere, in ungranted directories too"},
	{Name: "udp", Class: "net", Bits: NetBindUDP | NetConnectSendUDP, What: "UDP bind, connect and send on any port"},
}

// closedBy reports whether row handles every bit of g.
func (g Gap) closedBy(row ABIRow) bool {
	var set uint64
	switch g.Class {
	case "fs":
		set = row.FS
	case "net":
		set = row.Net
	case "scope":
		set = row.Scope
	}
	return set&g.Bits == g.Bits
}

// Since is the first ABI version that closes g (0 when no row of ABITable
// does, which TestGapsClosed forbids).
func (g Gap) Since() int {
	for _, row := range ABITable {
		if g.closedBy(row) {
			return row.Version
		}
	}
	return 0
}

// Unrestricted lists the gaps a kernel reporting ABI abi leaves open, in
// the order of Gaps. A kernel newer than ABITable closes them all.
func Unrestricted(abi int) []Gap {
	row, _ := Row(abi)
	var open []Gap
	for _, g := range Gaps {
		if !g.closedBy(row) {
			open = append(open, g)
		}
	}
	return open
}

// GapNames joins the names of gaps with commas ("" for none).
func GapNames(gaps []Gap) string {
	names := make([]string, len(gaps))
	for i, g := range gaps {
		names[i] = g.Name
	}
	return strings.Join(names, ",")
}

// Row returns the table row that governs a kernel reporting ABI abi: the row
// itself, or the newest row for a kernel newer than the table. newer reports
// the latter case.
func Row(abi int) (row ABIRow, newer bool) {
	if abi < 0 {
		return ABITable[0], false
	}
	if abi >= len(ABITable) {
		return ABITable[len(ABITable)-1], true
	}
	return ABITable[abi], false
}

// ErrNoLandlock reports a kernel without Landlock (not built, or not in the
// lsm= list at boot). The enforcer never runs a command unprotected.
var ErrNoLandlock = fmt.Errorf("landlock is not available on this kernel: %w", ErrRefused)

var hostABI = sync.OnceValues(func() (int, error) {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0, errorf(ErrNoLandlock, "landlock is not available on this kernel (landlock_create_ruleset: %v): not built, or not in the lsm= boot list; refusing to run unprotected. Nothing ran.", err)
	}
	return v, nil
})

// HostABI returns the running kernel's Landlock ABI version, asking the kernel
// once per process. The error wraps ErrNoLandlock when the kernel has none.
func HostABI() (int, error) { return hostABI() }

// ABI is another name for HostABI.
func ABI() (int, error) { return hostABI() }

// HostErrata returns the bitmask of Landlock errata the running kernel has
// fixed (LANDLOCK_CREATE_RULESET_ERRATA, Linux 6.15+; 0 before).
func HostErrata() (int, error) {
	e, err := ll.LandlockGetErrata()
	if err != nil {
		return 0, fmt.Errorf("landlock_create_ruleset(ERRATA): %w", err)
	}
	return e, nil
}
