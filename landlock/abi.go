package landlock

import "strings"

// First ABI versions of the features lockstep relies on. The rows of Rights
// and RestrictSelfFlags name their ABI with these, so each number is
// written once.
const (
	// ABIFirst is Landlock's first version: filesystem rights but refer
	// and truncate.
	ABIFirst = 1
	// ABIRefer adds fs.refer: renaming and linking across directories.
	ABIRefer = 2
	// ABITruncate adds fs.truncate.
	ABITruncate = 3
	// ABINetwork adds TCP bind and connect port rules.
	ABINetwork = 4
	// ABIIoctlDev adds fs.ioctl_dev.
	ABIIoctlDev = 5
	// ABIScope adds the abstract UNIX socket and signal scopes.
	ABIScope = 6
	// ABIAuditRecords adds audit records of denials (LANDLOCK_ACCESS,
	// LANDLOCK_DOMAIN) and the restrict_self flags that steer them.
	ABIAuditRecords = 7
	// ABITSync adds LANDLOCK_RESTRICT_SELF_TSYNC.
	ABITSync = 8
	// ABIResolveUnix adds fs.resolve_unix: connecting to a pathname UNIX
	// socket.
	ABIResolveUnix = 9
	// ABIUDP adds UDP bind and connect/send port rules.
	ABIUDP = 10
	// ABINoNewPrivs adds LANDLOCK_RESTRICT_SELF_NO_NEW_PRIVS (no new right).
	ABINoNewPrivs = 11
)

// landlock_restrict_self flags.
const (
	RestrictLogSameExecOff   uint32 = 1 << 0 // LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF
	RestrictLogNewExecOn     uint32 = 1 << 1 // LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	RestrictLogSubdomainsOff uint32 = 1 << 2 // LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF
	RestrictTSync            uint32 = 1 << 3 // LANDLOCK_RESTRICT_SELF_TSYNC
	RestrictNoNewPrivs       uint32 = 1 << 4 // LANDLOCK_RESTRICT_SELF_NO_NEW_PRIVS
)

// Flag is one landlock_restrict_self flag.
type Flag struct {
	Bit uint32
	// Name is the uapi name after LANDLOCK_RESTRICT_SELF_.
	Name string
	// ABI is the Landlock ABI version that introduced it.
	ABI int
}

// RestrictSelfFlags lists the landlock_restrict_self flags in bit order.
var RestrictSelfFlags = []Flag{
	{RestrictLogSameExecOff, "LOG_SAME_EXEC_OFF", ABIAuditRecords},
	{RestrictLogNewExecOn, "LOG_NEW_EXEC_ON", ABIAuditRecords},
	{RestrictLogSubdomainsOff, "LOG_SUBDOMAINS_OFF", ABIAuditRecords},
	{RestrictTSync, "TSYNC", ABITSync},
	{RestrictNoNewPrivs, "NO_NEW_PRIVS", ABINoNewPrivs},
}

// ABIRow is what one Landlock ABI version can restrict. Each row is a
// superset of the one before it.
type ABIRow struct {
	Version int
	// FS, Net and Scope are the access rights and scopes this ABI handles.
	FS, Net, Scope uint64
	// RestrictFlags are the landlock_restrict_self flags it accepts.
	RestrictFlags uint32
}

// ABITable is indexed by ABI version: ABITable[v].Version == v. Row 0 is
// "no Landlock"; the last row is the newest ABI any right or flag names. It
// is derived from Rights and RestrictSelfFlags.
var ABITable = func() []ABIRow {
	latest := 0
	for _, f := range Rights {
		latest = max(latest, f.ABI)
	}
	for _, f := range RestrictSelfFlags {
		latest = max(latest, f.ABI)
	}
	table := make([]ABIRow, latest+1)
	for v := range table {
		table[v] = ABIRow{Version: v, FS: Mask(ClassFS, v), Net: Mask(ClassNet, v), Scope: Mask(ClassScope, v)}
		for _, f := range RestrictSelfFlags {
			if f.ABI <= v {
				table[v].RestrictFlags |= f.Bit
			}
		}
	}
	return table
}()

// Row returns the table row that governs a kernel reporting ABI abi: the
// row itself, or the newest row for a kernel newer than the table. newer
// reports the latter case.
func Row(abi int) (row ABIRow, newer bool) {
	if abi < 0 {
		return ABITable[0], false
	}
	if abi >= len(ABITable) {
		return ABITable[len(ABITable)-1], true
	}
	return ABITable[abi], false
}

// mask is the row's set of class c.
func (row ABIRow) mask(c Class) uint64 {
	switch c {
	case ClassFS:
		return row.FS
	case ClassNet:
		return row.Net
	case ClassScope:
		return row.Scope
	}
	return 0
}

// Gap is one kind of operation that a Landlock ABI without Bits does not
// restrict at all: on such a kernel the command may do it whatever the
// policy says (Landlock denies by default only what it handles). The first
// ABI that closes a gap is read from the rights (Since), never written down
// twice.
type Gap struct {
	// Name is the token of the enforcer status line's unrestricted= field.
	Name string
	// What says what goes unrestricted, for messages and docs.
	What string
	// Class is the class Bits belong to.
	Class Class
	// Bits are the rights (or scopes) that close the gap, all of them.
	Bits uint64
}

// Gaps lists every gap an older ABI leaves, in the order the ABIs closed
// them. A right whose absence only refuses more (REFER below ABI 2: every
// cross-directory rename is refused) is not a gap.
var Gaps = []Gap{
	{Name: "truncate", Class: ClassFS, Bits: FSTruncate, What: "truncate(2) of any file, granted [write] or not"},
	{Name: "tcp", Class: ClassNet, Bits: NetBindTCP | NetConnectTCP, What: "TCP bind and connect on any port"},
	{Name: "ioctl-dev", Class: ClassFS, Bits: FSIoctlDev, What: "every ioctl(2) on a device file it may open"},
	{Name: "abstract-unix", Class: ClassScope, Bits: ScopeAbstractUnixSocket, What: "connecting to abstract UNIX sockets of processes outside the sandbox"},
	{Name: "signal", Class: ClassScope, Bits: ScopeSignal, What: "signals to processes outside the sandbox"},
	{Name: "unix-connect", Class: ClassFS, Bits: FSResolveUnix, What: "connect(2) or sendmsg(2) to a pathname UNIX socket anywhere, in ungranted directories too"},
	{Name: "udp", Class: ClassNet, Bits: NetBindUDP | NetConnectSendUDP, What: "UDP bind, connect and send on any port"},
}

// closedBy reports whether row handles every bit of g.
func (g Gap) closedBy(row ABIRow) bool { return row.mask(g.Class)&g.Bits == g.Bits }

// Since is the first ABI version that closes g (0 when no row of ABITable
// does).
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

// Releases is the first mainline Linux release of each Landlock ABI that
// lockstep knows the release of, in order. ABIs 8 and 9 came between 6.15
// and 7.2 in releases not listed here, so a release in that range has no
// known ABI (ReleaseABI).
var Releases = []struct{ Major, Minor, ABI int }{
	{5, 13, ABIFirst}, {5, 19, ABIRefer}, {6, 2, ABITruncate}, {6, 7, ABINetwork},
	{6, 10, ABIIoctlDev}, {6, 12, ABIScope}, {6, 15, ABIAuditRecords},
	{7, 2, ABIUDP}, {7, 3, ABINoNewPrivs},
}

// ReleaseABI is the Landlock ABI of mainline Linux major.minor (0 before
// 5.13: no Landlock), as Releases says; false when Releases cannot tell
// (between 6.16 and 7.1, after the last row's release).
func ReleaseABI(major, minor int) (int, bool) {
	v := major*1000 + minor
	abi := 0
	for i, r := range Releases {
		if v == r.Major*1000+r.Minor {
			return r.ABI, true
		}
		if v < r.Major*1000+r.Minor {
			known := i == 0 || r.ABI == abi+1
			return abi, known
		}
		abi = r.ABI
	}
	last := Releases[len(Releases)-1]
	return abi, v == last.Major*1000+last.Minor
}
