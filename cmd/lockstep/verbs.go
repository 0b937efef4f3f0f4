package main

import (
	"flag"
	"os"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

// checkAccel refuses an --accel value that names no accelerator.
func checkAccel(accel string) error {
	switch accel {
	case harness.AccelAuto, harness.AccelKVM, harness.AccelTCG:
		return nil
	}
	return cli.Usagef("--accel %q: want auto, kvm or tcg", accel)
}

// maxTCGTimeFactor bounds --tcg-time-factor: a bigger factor only hides a
// run that hangs.
const maxTCGTimeFactor = 100

// tcgTimeFactorFlag is --tcg-time-factor of the verbs that time exercise
// runs in guests (observe, verify).
func tcgTimeFactorFlag(fs *flag.FlagSet) *int {
	return fs.Int("tcg-time-factor", harness.DefaultTCGTimeFactor,
		"under TCG, multiply the exercise runs' timeout and cpu limits by `N` (1 keeps the policy's; not the containment checks')")
}

// checkGuestFlags checks --accel and --tcg-time-factor of a verb that
// boots guests to time exercise runs.
func checkGuestFlags(accel string, tcgFactor int) error {
	if err := checkAccel(accel); err != nil {
		return err
	}
	if tcgFactor < 1 || tcgFactor > maxTCGTimeFactor {
		return cli.Usagef("--tcg-time-factor %d: want 1 to %d", tcgFactor, maxTCGTimeFactor)
	}
	return nil
}

// inGuestOut is where an --in-guest side writes: --out, else, in a guest,
// the results directory that comes back to the host.
func inGuestOut(out string) (string, error) {
	if out != "" {
		return out, nil
	}
	if os.Getenv(proto.EnvGuest) != "1" {
		return "", cli.Usagef("--in-guest outside a guest needs --out")
	}
	return proto.ResultsDir, nil
}
