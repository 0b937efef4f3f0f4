package enforcer

import (
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

func TestABITableGrows(t *testing.T) {
	for i, row := range ABITable {
		if row.Version != i {
			t.Errorf("ABITable[%d].Version = %d, want %d", i, row.Version, i)
		}
		if i == 0 {
			if row != (ABIRow{}) {
				t.Errorf("ABITable[0] = %+v, want the zero row (no Landlock)", row)
			}
			continue
		}
		prev := ABITable[i-1]
		sub := func(name string, a, b uint64) {
			if a&b != a {
				t.Errorf("ABI %d %s = %#x is not a superset of ABI %d's %#x", i, name, b, i-1, a)
			}
		}
		sub("FS", prev.FS, row.FS)
		sub("Net", prev.Net, row.Net)
		sub("Scope", prev.Scope, row.Scope)
		sub("RestrictFlags", uint64(prev.RestrictFlags), uint64(row.RestrictFlags))
		if row.FS == prev.FS && row.Net == prev.Net && row.Scope == prev.Scope && row.RestrictFlags == prev.RestrictFlags {
			t.Errorf("ABI %d adds nothing over ABI %d", i, i-1)
		}
	}
}

func TestFirstVersions(t *testing.T) {
	first := func(has func(ABIRow) bool) int {
		for _, r := range ABITable {
			if has(r) {
				return r.Version
			}
		}
		return -1
	}
	for _, tc := range []struct {
		name string
		has  func(ABIRow) bool
		want int
	}{
		{"REFER", func(r ABIRow) bool { return r.FS&FSRefer != 0 }, ABIRefer},
		{"TRUNCATE", func(r ABIRow) bool { return r.FS&FSTruncate != 0 }, ABITruncate},
		{"network", func(r ABIRow) bool { return r.Net&NetBindTCP != 0 }, ABINetwork},
		{"IOCTL_DEV", func(r ABIRow) bool { return r.FS&FSIoctlDev != 0 }, ABIIoctlDev},
		{"scopes", func(r ABIRow) bool { return r.Scope != 0 }, ABIScope},
		{"log flags", func(r ABIRow) bool { return r.RestrictFlags&RestrictLogNewExecOn != 0 }, ABILogFlags},
		{"RESOLVE_UNIX", func(r ABIRow) bool { return r.FS&FSResolveUnix != 0 }, ABIResolveUnix},
		{"UDP", func(r ABIRow) bool { return r.Net&NetBindUDP != 0 }, ABIUDP},
	} {
		if got := first(tc.has); got != tc.want {
			t.Errorf("first ABI with %s = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestConstantsMatchUAPI cross-checks every hand-written constant against
// golang.org/x/sys/unix (generated from the kernel's uapi headers) and
// go-landlock's syscall package.
func TestConstantsMatchUAPI(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ours        uint64
		xsys, gollk uint64
	}{
		{"FS_EXECUTE", FSExecute, unix.LANDLOCK_ACCESS_FS_EXECUTE, ll.AccessFSExecute},
		{"FS_WRITE_FILE", FSWriteFile, unix.LANDLOCK_ACCESS_FS_WRITE_FILE, ll.AccessFSWriteFile},
		{"FS_READ_FILE", FSReadFile, unix.LANDLOCK_ACCESS_FS_READ_FILE, ll.AccessFSReadFile},
		{"FS_READ_DIR", FSReadDir, unix.LANDLOCK_ACCESS_FS_READ_DIR, ll.AccessFSReadDir},
		{"FS_REMOVE_DIR", FSRemoveDir, unix.LANDLOCK_ACCESS_FS_REMOVE_DIR, ll.AccessFSRemoveDir},
		{"FS_REMOVE_FILE", FSRemoveFile, unix.LANDLOCK_ACCESS_FS_REMOVE_FILE, ll.AccessFSRemoveFile},
		{"FS_MAKE_CHAR", FSMakeChar, unix.LANDLOCK_ACCESS_FS_MAKE_CHAR, ll.AccessFSMakeChar},
		{"FS_MAKE_DIR", FSMakeDir, unix.LANDLOCK_ACCESS_FS_MAKE_DIR, ll.AccessFSMakeDir},
		{"FS_MAKE_REG", FSMakeReg, unix.LANDLOCK_ACCESS_FS_MAKE_REG, ll.AccessFSMakeReg},
		{"FS_MAKE_SOCK", FSMakeSock, unix.LANDLOCK_ACCESS_FS_MAKE_SOCK, ll.AccessFSMakeSock},
		{"FS_MAKE_FIFO", FSMakeFifo, unix.LANDLOCK_ACCESS_FS_MAKE_FIFO, ll.AccessFSMakeFifo},
		{"FS_MAKE_BLOCK", FSMakeBlock, unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK, ll.AccessFSMakeBlock},
		{"FS_MAKE_SYM", FSMakeSym, unix.LANDLOCK_ACCESS_FS_MAKE_SYM, ll.AccessFSMakeSym},
		{"FS_REFER", FSRefer, unix.LANDLOCK_ACCESS_FS_REFER, ll.AccessFSRefer},
		{"FS_TRUNCATE", FSTruncate, unix.LANDLOCK_ACCESS_FS_TRUNCATE, ll.AccessFSTruncate},
		{"FS_IOCTL_DEV", FSIoctlDev, unix.LANDLOCK_ACCESS_FS_IOCTL_DEV, ll.AccessFSIoctlDev},
		{"FS_RESOLVE_UNIX", FSResolveUnix, unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX, ll.AccessFSResolveUnix},
		{"NET_BIND_TCP", NetBindTCP, unix.LANDLOCK_ACCESS_NET_BIND_TCP, ll.AccessNetBindTCP},
		{"NET_CONNECT_TCP", NetConnectTCP, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, ll.AccessNetConnectTCP},
		{"NET_BIND_UDP", NetBindUDP, unix.LANDLOCK_ACCESS_NET_BIND_UDP, ll.AccessNetBindUDP},
		{"NET_CONNECT_SEND_UDP", NetConnectSendUDP, unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP, ll.AccessNetConnectSendUDP},
		{"SCOPE_ABSTRACT_UNIX_SOCKET", ScopeAbstractUnixSocket, unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, ll.ScopeAbstractUnixSocket},
		{"SCOPE_SIGNAL", ScopeSignal, unix.LANDLOCK_SCOPE_SIGNAL, ll.ScopeSignal},
		{"RESTRICT_SELF_LOG_SAME_EXEC_OFF", uint64(RestrictLogSameExecOff), unix.LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF, ll.FlagRestrictSelfLogSameExecOff},
		{"RESTRICT_SELF_LOG_NEW_EXEC_ON", uint64(RestrictLogNewExecOn), unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, ll.FlagRestrictSelfLogNewExecOn},
		{"RESTRICT_SELF_LOG_SUBDOMAINS_OFF", uint64(RestrictLogSubdomainsOff), unix.LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF, ll.FlagRestrictSelfLogSubdomainsOff},
		{"RESTRICT_SELF_TSYNC", uint64(RestrictTSync), unix.LANDLOCK_RESTRICT_SELF_TSYNC, ll.FlagRestrictSelfTSync},
		// x/sys v0.50.0 does not have NO_NEW_PRIVS yet: compare with go-landlock twice.
		{"RESTRICT_SELF_NO_NEW_PRIVS", uint64(RestrictNoNewPrivs), ll.FlagRestrictSelfNoNewPrivs, ll.FlagRestrictSelfNoNewPrivs},
	} {
		if tc.ours != tc.xsys || tc.ours != tc.gollk {
			t.Errorf("LANDLOCK_%s: ours %#x, x/sys/unix %#x, go-landlock %#x; want all equal", tc.name, tc.ours, tc.xsys, tc.gollk)
		}
	}
}

// TestABITableMatchesGoLandlock compares each row with go-landlock's preset
// for the same version, which restricts everything that version can.
func TestABITableMatchesGoLandlock(t *testing.T) {
	presets := []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}
	for i, c := range presets {
		row := ABITable[i+1]
		if uint64(c.HandledAccessFS) != row.FS || uint64(c.HandledAccessNet) != row.Net || uint64(c.Scoped) != row.Scope {
			t.Errorf("ABI %d: ours fs=%#x net=%#x scope=%#x, go-landlock V%d fs=%#x net=%#x scope=%#x",
				row.Version, row.FS, row.Net, row.Scope, i+1, uint64(c.HandledAccessFS), uint64(c.HandledAccessNet), uint64(c.Scoped))
		}
	}
	if len(ABITable) != len(presets)+1 {
		t.Errorf("len(ABITable) = %d, want %d (rows 0..%d); a new ABI needs a row and a preset check", len(ABITable), len(presets)+1, len(presets))
	}
}

func TestRow(t *testing.T) {
	last := len(ABITable) - 1
	for _, tc := range []struct {
		abi       int
		wantVer   int
		wantNewer bool
	}{{-1, 0, false}, {0, 0, false}, {7, 7, false}, {last, last, false}, {last + 3, last, true}} {
		row, newer := Row(tc.abi)
		if row.Version != tc.wantVer || newer != tc.wantNewer {
			t.Errorf("Row(%d) = v%d, newer %v; want v%d, %v", tc.abi, row.Version, newer, tc.wantVer, tc.wantNewer)
		}
	}
}

func TestHostABI(t *testing.T) {
	abi, err := HostABI()
	if err != nil {
		t.Fatalf("HostABI() error: %v (this machine's kernel must have Landlock)", err)
	}
	if abi < 1 {
		t.Fatalf("HostABI() = %d, want >= 1", abi)
	}
	if e, err := HostErrata(); err != nil || e < 0 {
		t.Errorf("HostErrata() = %d, %v; want a bitmask", e, err)
	}
	t.Logf("host Landlock ABI %d", abi)
}

// TestGaps: every gap is closed by some ABI, at the version the kernel
// documentation gives it, and Unrestricted names what each ABI leaves open.
func TestGaps(t *testing.T) {
	want := map[string]int{"truncate": ABITruncate, "tcp": ABINetwork, "ioctl-dev": ABIIoctlDev,
		"abstract-unix": ABIScope, "signal": ABIScope, "unix-connect": ABIResolveUnix, "udp": ABIUDP}
	for _, g := range Gaps {
		if got := g.Since(); got == 0 || got != want[g.Name] {
			t.Errorf("gap %s closed by ABI %d, want %d", g.Name, got, want[g.Name])
		}
		delete(want, g.Name)
	}
	if len(want) > 0 {
		t.Errorf("gaps missing from Gaps: %v", want)
	}
	for _, tc := range []struct {
		abi  int
		want string
	}{
		{1, "truncate,tcp,ioctl-dev,abstract-unix,signal,unix-connect,udp"},
		{4, "ioctl-dev,abstract-unix,signal,unix-connect,udp"},
		{6, "unix-connect,udp"},
		{7, "unix-connect,udp"},
		{9, "udp"},
		{10, ""},
		{len(ABITable) + 2, ""},
	} {
		if got := GapNames(Unrestricted(tc.abi)); got != tc.want {
			t.Errorf("Unrestricted(%d) = %q, want %q", tc.abi, got, tc.want)
		}
	}
}
