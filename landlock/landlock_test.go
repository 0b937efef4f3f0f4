package landlock

import (
	"slices"
	"strings"
	"testing"
)

// TestRightsTable: names are unique and carry their class, bits are
// unique within a class, only filesystem rights apply to files and only
// network rights have a transport, and every right a section grants is of
// a class sections grant.
func TestRightsTable(t *testing.T) {
	seen := map[Right]bool{}
	bits := map[Class]uint64{}
	for i, f := range Rights {
		if seen[f.Right] {
			t.Errorf("Rights[%d] %s appears twice", i, f.Right)
		}
		seen[f.Right] = true
		if got, ok := Lookup(string(f.Right)); !ok || got.Right != f.Right {
			t.Errorf("Lookup(%q) = %+v, %v", f.Right, got, ok)
		}
		if f.Class != ClassImplicit && !strings.HasPrefix(string(f.Right), f.Class.String()+".") {
			t.Errorf("Rights[%d] %q has class %v", i, f.Right, f.Class)
		}
		if f.ABI < ABIFirst || f.ABI >= len(ABITable) {
			t.Errorf("Rights[%d] %s: ABI %d", i, f.Right, f.ABI)
		}
		switch {
		case f.Class == ClassImplicit && f.Bit != 0:
			t.Errorf("implicit %s has bit %#x", f.Right, f.Bit)
		case f.Class != ClassImplicit && (f.Bit == 0 || f.Bit&(f.Bit-1) != 0 || bits[f.Class]&f.Bit != 0):
			t.Errorf("%s: bit %#x is not one new bit of %v", f.Right, f.Bit, f.Class)
		}
		bits[f.Class] |= f.Bit
		if f.File && f.Class != ClassFS || (f.Transport != "") != (f.Class == ClassNet) {
			t.Errorf("%s: File %v, Transport %q for class %v", f.Right, f.File, f.Transport, f.Class)
		}
		if len(f.Sections) > 0 && f.Class != ClassFS && f.Class != ClassNet {
			t.Errorf("%s of class %v has sections %v", f.Right, f.Class, f.Sections)
		}
	}
	if _, ok := Lookup("unknown"); ok {
		t.Error(`Lookup("unknown") found a right`)
	}
}

// TestDerivedMasks pins what the enforcer's tables were before they were
// derived from Rights.
func TestDerivedMasks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uint64
	}{
		{"[read]", SectionMask("read"), FSReadFile | FSReadDir | FSResolveUnix},
		{"[execute]", SectionMask("execute"), FSExecute},
		{"[write]", SectionMask("write"), FSWriteFile | FSTruncate},
		{"[create]", SectionMask("create"), FSMakeReg | FSMakeDir},
		{"[create-ipc]", SectionMask("create-ipc"), FSMakeSock | FSMakeFifo},
		{"[create-symlink]", SectionMask("create-symlink"), FSMakeSym},
		{"[delete]", SectionMask("delete"), FSRemoveFile | FSRemoveDir},
		{"[restructure]", SectionMask("restructure"), FSMakeReg | FSMakeDir | FSRemoveFile | FSRemoveDir | FSRefer},
		{"[ioctl]", SectionMask("ioctl"), FSIoctlDev},
		{"[bind] (no filesystem right)", SectionMask("bind"), 0},
		{"file rights", FileMask(), FSExecute | FSWriteFile | FSReadFile | FSTruncate | FSIoctlDev | FSResolveUnix},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.name, tc.got, tc.want)
		}
	}
	if got := Names(ClassFS, FSReadFile|FSReadDir); got != "READ_FILE|READ_DIR" {
		t.Errorf("Names(fs) = %q", got)
	}
	if got := Names(ClassScope, ScopeAbstractUnixSocket|ScopeSignal); got != "ABSTRACT_UNIX_SOCKET|SIGNAL" {
		t.Errorf("Names(scope) = %q", got)
	}
	if got := Names(ClassNet, 0); got != "none" {
		t.Errorf("Names(net, 0) = %q", got)
	}
	if ReadFile.Section() != "read" || MakeChar.Section() != "" || BindUDP.Transport() != "udp" || Refer.ABI() != ABIRefer {
		t.Error("the Right methods do not read the table")
	}
}

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

// TestFeatureABIs: each named feature ABI is the first row that has the
// feature, and the kernel documentation's number for it.
func TestFeatureABIs(t *testing.T) {
	first := func(has func(ABIRow) bool) int {
		for _, r := range ABITable {
			if has(r) {
				return r.Version
			}
		}
		return -1
	}
	for _, tc := range []struct {
		name      string
		has       func(ABIRow) bool
		abi, want int
	}{
		{"REFER", func(r ABIRow) bool { return r.FS&FSRefer != 0 }, ABIRefer, 2},
		{"TRUNCATE", func(r ABIRow) bool { return r.FS&FSTruncate != 0 }, ABITruncate, 3},
		{"network", func(r ABIRow) bool { return r.Net&NetBindTCP != 0 }, ABINetwork, 4},
		{"IOCTL_DEV", func(r ABIRow) bool { return r.FS&FSIoctlDev != 0 }, ABIIoctlDev, 5},
		{"scopes", func(r ABIRow) bool { return r.Scope != 0 }, ABIScope, 6},
		{"log flags", func(r ABIRow) bool { return r.RestrictFlags&RestrictLogNewExecOn != 0 }, ABIAuditRecords, 7},
		{"TSYNC", func(r ABIRow) bool { return r.RestrictFlags&RestrictTSync != 0 }, ABITSync, 8},
		{"RESOLVE_UNIX", func(r ABIRow) bool { return r.FS&FSResolveUnix != 0 }, ABIResolveUnix, 9},
		{"UDP", func(r ABIRow) bool { return r.Net&NetBindUDP != 0 }, ABIUDP, 10},
		{"NO_NEW_PRIVS", func(r ABIRow) bool { return r.RestrictFlags&RestrictNoNewPrivs != 0 }, ABINoNewPrivs, 11},
	} {
		if got := first(tc.has); got != tc.abi || got != tc.want {
			t.Errorf("first ABI with %s = %d, constant %d, want %d", tc.name, got, tc.abi, tc.want)
		}
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

// TestSyscalls: every right the syscall table names is a filesystem or
// network right of its kind, every call has its arguments, and only a
// device node's rights go ungranted by every section.
func TestSyscalls(t *testing.T) {
	for name, s := range Syscalls {
		rights := slices.Clone(s.Rights)
		for _, v := range s.Variants {
			rights = append(rights, v.Rights...)
			if s.Flags < 0 {
				t.Errorf("%s has variants but no flag argument", name)
			}
		}
		for _, r := range rights {
			if r.Class() != ClassFS {
				t.Errorf("%s: %s is not a filesystem right", name, r)
			}
			if r.Section() == "" && r != MakeChar && r != MakeBlock {
				t.Errorf("%s: no section grants %s", name, r)
			}
		}
		switch s.Kind {
		case KindPath, KindFD:
			if len(s.Rights) == 0 || s.Object == 0 {
				t.Errorf("%s: no rights or object", name)
			}
		case KindOpen:
			if s.Flags < 0 && s.ImpliedFlags == "" {
				t.Errorf("%s: open without flags", name)
			}
		case KindMove:
			if s.Path == s.Path2 {
				t.Errorf("%s: source and destination are one argument", name)
			}
		case KindAddr:
			if s.TCP.Class() != ClassNet || s.UDP.Class() != ClassNet || s.TCP.Transport() != "tcp" || s.UDP.Transport() != "udp" ||
				s.TCP.Section() != s.UDP.Section() || len(s.Rights) != 1 {
				t.Errorf("%s: TCP %s, UDP %s, UNIX %v", name, s.TCP, s.UDP, s.Rights)
			}
		default:
			t.Errorf("%s: kind %d", name, s.Kind)
		}
		if s.Kind != KindAddr && s.Kind != KindFD && s.Path < 0 {
			t.Errorf("%s: no path argument", name)
		}
	}
}

func TestReleaseABI(t *testing.T) {
	for _, tc := range []struct {
		Major, Minor, ABI int
		OK                bool
	}{
		{5, 10, 0, true}, {5, 13, 1, true}, {6, 1, 2, true}, {6, 12, 6, true}, {6, 15, 7, true},
		{6, 16, 7, false}, {7, 1, 7, false}, {7, 2, 10, true}, {7, 3, 11, true}, {7, 4, 11, false},
	} {
		abi, ok := ReleaseABI(tc.Major, tc.Minor)
		if ok != tc.OK || (ok && abi != tc.ABI) {
			t.Errorf("ReleaseABI(%d.%d) = %d, %v; want %d, %v", tc.Major, tc.Minor, abi, ok, tc.ABI, tc.OK)
		}
	}
}
