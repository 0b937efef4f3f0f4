package enforcer

import (
	"fmt"
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
