package featuretest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Feature is a kernel feature a test needs, with the first kernel that
// offers it: a Landlock ABI version (from the landlock package's table) or,
// for a feature outside Landlock, a kernel release.
type Feature struct {
	Name    string
	ABI     int    // first Landlock ABI with the feature; 0 when Release says
	Release string // first kernel release ("6.3") when ABI is 0
}

// landlockRelease is the first kernel release with Landlock (ABI 1): on it
// or later, a kernel without Landlock was built or booted without it.
const landlockRelease = "5.13"

// The features lockstep's tests need.
var (
	Landlock         = Feature{Name: "Landlock", ABI: landlock.ABIFirst}
	LandlockTruncate = Feature{Name: "Landlock fs.truncate", ABI: landlock.ABITruncate}
	LandlockNetwork  = Feature{Name: "Landlock TCP port rules", ABI: landlock.ABINetwork}
	LandlockIoctlDev = Feature{Name: "Landlock fs.ioctl_dev", ABI: landlock.ABIIoctlDev}
	LandlockScope    = Feature{Name: "Landlock signal and abstract socket scopes", ABI: landlock.ABIScope}
	LandlockAudit    = Feature{Name: "Landlock audit records", ABI: landlock.ABIAuditRecords}
	LandlockUDP      = Feature{Name: "Landlock UDP port rules", ABI: landlock.ABIUDP}
	// MemfdNoexec is the vm.memfd_noexec sysctl (Linux 6.3).
	MemfdNoexec = Feature{Name: "vm.memfd_noexec", Release: "6.3"}
	// LegacyTIOCSTI is the dev.tty.legacy_tiocsti sysctl (Linux 6.2).
	LegacyTIOCSTI = Feature{Name: "dev.tty.legacy_tiocsti", Release: "6.2"}
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Kernel is what the running kernel offers: its Landlock ABI (0 with
// ABIErr set when it has none) and its release.
type Kernel struct {
	ABI     int
	ABIErr  error
	Release string
}

// Host returns the running kernel's facts, read once per test binary.
var Host = sync.OnceValue(func() Kernel {
	abi, err := ll.LandlockGetABIVersion()
	return Kernel{ABI: abi, ABIErr: err, Release: release()}
})

// Require skips the test when the running kernel is below f's first
// version and returns the kernel's Landlock ABI. For a Landlock feature on
// a kernel without Landlock it skips below Landlock's first release and
// fails at or above it.
func Require(tb TB, f Feature) int {
	tb.Helper()
	k := Host()
	return k.Require(tb, f)
}

// SkipIfNotSupported judges err, the result of trying f: nil passes; below
// f's first version the test is skipped, at or above it the test fails
// with err, since the kernel should have offered f.
func SkipIfNotSupported(tb TB, f Feature, err error) {
	tb.Helper()
	Host().SkipIfNotSupported(tb, f, err)
}

// RequireWithout skips the test when the running kernel offers f: for the
// cases only an older kernel shows (a refusal for want of f).
func RequireWithout(tb TB, f Feature) int {
	tb.Helper()
	k := Host()
	if has, _ := k.Has(f); has {
		tb.Skipf("this kernel offers %s (%s); the case needs a kernel without it", f.Name, k.describe(f))
	}
	return k.ABI
}

// Require is Require for kernel k.
func (k Kernel) Require(tb TB, f Feature) int {
	tb.Helper()
	if has, why := k.Has(f); !has {
		k.skipOrFail(tb, f, why)
	}
	return k.ABI
}

// SkipIfNotSupported is SkipIfNotSupported for kernel k.
func (k Kernel) SkipIfNotSupported(tb TB, f Feature, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if has, _ := k.Has(f); has {
		tb.Fatalf("%s: %v; this kernel (%s) should offer it", f.Name, err, k.describe(f))
		return
	}
	k.skipOrFail(tb, f, err.Error())
}

// skipOrFail skips for want of f, unless k is a Landlock-less kernel on
// or after Landlock's first release, which fails.
func (k Kernel) skipOrFail(tb TB, f Feature, why string) {
	tb.Helper()
	if f.ABI > 0 && k.ABIErr != nil && AtLeast(k.Release, landlockRelease) {
		tb.Fatalf("%s: this kernel (%s) has no Landlock (%v): Linux has it since %s; it was built or booted without it (lsm=)", f.Name, k.Release, k.ABIErr, landlockRelease)
		return
	}
	tb.Skipf("needs %s: %s", f.Name, why)
}

// Has reports whether k offers f by its version, and if not, why.
func (k Kernel) Has(f Feature) (bool, string) {
	if f.ABI > 0 {
		if k.ABIErr != nil {
			return false, fmt.Sprintf("no Landlock on %s (%v)", k.Release, k.ABIErr)
		}
		return k.ABI >= f.ABI, fmt.Sprintf("Landlock ABI %d, it needs %d", k.ABI, f.ABI)
	}
	return AtLeast(k.Release, f.Release), fmt.Sprintf("kernel %s, it needs %s", k.Release, f.Release)
}

func (k Kernel) describe(f Feature) string {
	if f.ABI > 0 {
		return fmt.Sprintf("Landlock ABI %d, %s from ABI %d", k.ABI, f.Name, f.ABI)
	}
	return fmt.Sprintf("kernel %s, %s from %s", k.Release, f.Name, f.Release)
}

// AtLeast reports whether kernel release rel ("6.18.44-fc-v1272") is at
// least min ("6.3"), comparing the numeric fields in order; a release it
// cannot read is not.
func AtLeast(rel, min string) bool {
	have, ok := fields(rel)
	want, _ := fields(min)
	if !ok {
		return false
	}
	for i, w := range want {
		h := 0
		if i < len(have) {
			h = have[i]
		}
		if h != w {
			return h > w
		}
	}
	return true
}

// fields reads the leading dotted numbers of a release.
func fields(rel string) ([]int, bool) {
	end := strings.IndexFunc(rel, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end >= 0 {
		rel = rel[:end]
	}
	var out []int
	for _, s := range strings.Split(rel, ".") {
		n, err := strconv.Atoi(s)
		if err != nil {
			break
		}
		out = append(out, n)
	}
	return out, len(out) > 0
}
