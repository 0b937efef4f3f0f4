package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// cpuUsage is --cpu's help, on every verb that boots guests.
const cpuUsage = "CPU `model` under KVM, as QEMU's -cpu takes it (host, host,-xsave, EPYC, …; default $" + harness.CPUEnv + ", else the model the KVM probe booted)"

// cpuFlag declares --cpu on a verb whose guests boot in its own process or
// in the lockstep processes it starts: a model given becomes $LOCKSTEP_CPU,
// which the harness reads for every guest that names no model and which
// those processes inherit. (boot passes its --cpu to its one guest.)
func cpuFlag(fs *flag.FlagSet) {
	fs.Func("cpu", cpuUsage, func(v string) error {
		if v == "" || strings.ContainsAny(v, " \t\n") {
			return fmt.Errorf("%q: want a model and its features as QEMU's -cpu takes them (host,-xsave), without spaces", v)
		}
		return os.Setenv(harness.CPUEnv, v)
	})
}

// The want functions say what a strict flag takes.

func wantHash() string { return "the sha256:<hex> that lockstep policy hash prints" }

func wantBaseDir() string { return "the directory holding the Base*.cfg files" }
func wantPin() string     { return "one of the pins " + kernel.PinNames() + " (kernel/pins.txt)" }

func wantKernel() string { return "a pin (" + kernel.PinNames() + ") or a bzImage file" }

func wantKernelOrHost() string { return "host, a pin (" + kernel.PinNames() + ") or a bzImage file" }
