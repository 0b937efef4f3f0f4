package enforcer

import (
	"fmt"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// ABIRow is what one Landlock ABI version can restrict; Compile takes one.
// The table of them is landlock.ABITable.
type ABIRow = landlock.ABIRow

// Row returns the row of landlock.ABITable that governs a kernel reporting
// ABI abi; newer reports a kernel newer than the table.
func Row(abi int) (row ABIRow, newer bool) { return landlock.Row(abi) }

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
