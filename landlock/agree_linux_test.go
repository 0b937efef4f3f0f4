package landlock

import (
	"testing"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// TestConstantsMatchUAPI cross-checks every hand-written bit against
// golang.org/x/sys/unix (generated from the kernel's uapi headers) and
// go-landlock's syscall package, and every right of the table against its
// constant by the uapi name.
func TestConstantsMatchUAPI(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ours        uint64
		xsys, gollk uint64
	}{
		{"ACCESS_FS_EXECUTE", FSExecute, unix.LANDLOCK_ACCESS_FS_EXECUTE, ll.AccessFSExecute},
		{"ACCESS_FS_WRITE_FILE", FSWriteFile, unix.LANDLOCK_ACCESS_FS_WRITE_FILE, ll.AccessFSWriteFile},
		{"ACCESS_FS_READ_FILE", FSReadFile, unix.LANDLOCK_ACCESS_FS_READ_FILE, ll.AccessFSReadFile},
		{"ACCESS_FS_READ_DIR", FSReadDir, unix.LANDLOCK_ACCESS_FS_READ_DIR, ll.AccessFSReadDir},
		{"ACCESS_FS_REMOVE_DIR", FSRemoveDir, unix.LANDLOCK_ACCESS_FS_REMOVE_DIR, ll.AccessFSRemoveDir},
		{"ACCESS_FS_REMOVE_FILE", FSRemoveFile, unix.LANDLOCK_ACCESS_FS_REMOVE_FILE, ll.AccessFSRemoveFile},
		{"ACCESS_FS_MAKE_CHAR", FSMakeChar, unix.LANDLOCK_ACCESS_FS_MAKE_CHAR, ll.AccessFSMakeChar},
		{"ACCESS_FS_MAKE_DIR", FSMakeDir, unix.LANDLOCK_ACCESS_FS_MAKE_DIR, ll.AccessFSMakeDir},
		{"ACCESS_FS_MAKE_REG", FSMakeReg, unix.LANDLOCK_ACCESS_FS_MAKE_REG, ll.AccessFSMakeReg},
		{"ACCESS_FS_MAKE_SOCK", FSMakeSock, unix.LANDLOCK_ACCESS_FS_MAKE_SOCK, ll.AccessFSMakeSock},
		{"ACCESS_FS_MAKE_FIFO", FSMakeFifo, unix.LANDLOCK_ACCESS_FS_MAKE_FIFO, ll.AccessFSMakeFifo},
		{"ACCESS_FS_MAKE_BLOCK", FSMakeBlock, unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK, ll.AccessFSMakeBlock},
		{"ACCESS_FS_MAKE_SYM", FSMakeSym, unix.LANDLOCK_ACCESS_FS_MAKE_SYM, ll.AccessFSMakeSym},
		{"ACCESS_FS_REFER", FSRefer, unix.LANDLOCK_ACCESS_FS_REFER, ll.AccessFSRefer},
		{"ACCESS_FS_TRUNCATE", FSTruncate, unix.LANDLOCK_ACCESS_FS_TRUNCATE, ll.AccessFSTruncate},
		{"ACCESS_FS_IOCTL_DEV", FSIoctlDev, unix.LANDLOCK_ACCESS_FS_IOCTL_DEV, ll.AccessFSIoctlDev},
		{"ACCESS_FS_RESOLVE_UNIX", FSResolveUnix, unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX, ll.AccessFSResolveUnix},
		{"ACCESS_NET_BIND_TCP", NetBindTCP, unix.LANDLOCK_ACCESS_NET_BIND_TCP, ll.AccessNetBindTCP},
		{"ACCESS_NET_CONNECT_TCP", NetConnectTCP, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, ll.AccessNetConnectTCP},
		{"ACCESS_NET_BIND_UDP", NetBindUDP, unix.LANDLOCK_ACCESS_NET_BIND_UDP, ll.AccessNetBindUDP},
		{"ACCESS_NET_CONNECT_SEND_UDP", NetConnectSendUDP, unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP, ll.AccessNetConnectSendUDP},
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

// TestRightsMatchUAPI: each row's bit is the uapi constant its name
// spells, so a row cannot pair a blocker name with another right's bit.
func TestRightsMatchUAPI(t *testing.T) {
	uapi := map[string]uint64{
		"ACCESS_FS_EXECUTE": unix.LANDLOCK_ACCESS_FS_EXECUTE, "ACCESS_FS_WRITE_FILE": unix.LANDLOCK_ACCESS_FS_WRITE_FILE,
		"ACCESS_FS_READ_FILE": unix.LANDLOCK_ACCESS_FS_READ_FILE, "ACCESS_FS_READ_DIR": unix.LANDLOCK_ACCESS_FS_READ_DIR,
		"ACCESS_FS_REMOVE_DIR": unix.LANDLOCK_ACCESS_FS_REMOVE_DIR, "ACCESS_FS_REMOVE_FILE": unix.LANDLOCK_ACCESS_FS_REMOVE_FILE,
		"ACCESS_FS_MAKE_CHAR": unix.LANDLOCK_ACCESS_FS_MAKE_CHAR, "ACCESS_FS_MAKE_DIR": unix.LANDLOCK_ACCESS_FS_MAKE_DIR,
		"ACCESS_FS_MAKE_REG": unix.LANDLOCK_ACCESS_FS_MAKE_REG, "ACCESS_FS_MAKE_SOCK": unix.LANDLOCK_ACCESS_FS_MAKE_SOCK,
		"ACCESS_FS_MAKE_FIFO": unix.LANDLOCK_ACCESS_FS_MAKE_FIFO, "ACCESS_FS_MAKE_BLOCK": unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK,
		"ACCESS_FS_MAKE_SYM": unix.LANDLOCK_ACCESS_FS_MAKE_SYM, "ACCESS_FS_REFER": unix.LANDLOCK_ACCESS_FS_REFER,
		"ACCESS_FS_TRUNCATE": unix.LANDLOCK_ACCESS_FS_TRUNCATE, "ACCESS_FS_IOCTL_DEV": unix.LANDLOCK_ACCESS_FS_IOCTL_DEV,
		"ACCESS_FS_RESOLVE_UNIX": unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX,
		"ACCESS_NET_BIND_TCP":    unix.LANDLOCK_ACCESS_NET_BIND_TCP, "ACCESS_NET_CONNECT_TCP": unix.LANDLOCK_ACCESS_NET_CONNECT_TCP,
		"ACCESS_NET_BIND_UDP": unix.LANDLOCK_ACCESS_NET_BIND_UDP, "ACCESS_NET_CONNECT_SEND_UDP": unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP,
		"SCOPE_ABSTRACT_UNIX_SOCKET": unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, "SCOPE_SIGNAL": unix.LANDLOCK_SCOPE_SIGNAL,
	}
	prefix := map[Class]string{ClassFS: "ACCESS_FS_", ClassNet: "ACCESS_NET_", ClassScope: "SCOPE_"}
	seen := 0
	for _, f := range Rights {
		if f.Class == ClassImplicit {
			continue
		}
		name := prefix[f.Class] + f.Right.Name()
		want, ok := uapi[name]
		if !ok || f.Bit != want {
			t.Errorf("%s: bit %#x, LANDLOCK_%s is %#x (known %v)", f.Right, f.Bit, name, want, ok)
		}
		seen++
	}
	if seen != len(uapi) {
		t.Errorf("%d rights with a bit, %d uapi constants", seen, len(uapi))
	}
}

// TestABITableMatchesGoLandlock compares each derived row with
// go-landlock's preset for the same version, which restricts everything
// that version can.
func TestABITableMatchesGoLandlock(t *testing.T) {
	presets := []golandlock.Config{golandlock.V1, golandlock.V2, golandlock.V3, golandlock.V4, golandlock.V5, golandlock.V6,
		golandlock.V7, golandlock.V8, golandlock.V9, golandlock.V10, golandlock.V11}
	for i, c := range presets {
		row := ABITable[i+1]
		if uint64(c.HandledAccessFS) != row.FS || uint64(c.HandledAccessNet) != row.Net || uint64(c.Scoped) != row.Scope {
			t.Errorf("ABI %d: ours fs=%#x net=%#x scope=%#x, go-landlock V%d fs=%#x net=%#x scope=%#x",
				row.Version, row.FS, row.Net, row.Scope, i+1, uint64(c.HandledAccessFS), uint64(c.HandledAccessNet), uint64(c.Scoped))
		}
	}
	if len(ABITable) != len(presets)+1 {
		t.Errorf("len(ABITable) = %d, want %d (rows 0..%d); a new ABI needs a preset check", len(ABITable), len(presets)+1, len(presets))
	}
}
