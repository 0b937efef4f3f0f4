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

// strictFlag is a string flag that refuses an empty value and a second,
// different value. For a flag that guards something, taking "" as "not
// given" or letting the last of two win fails open: run --expect-hash ”
// switched the hash check off, and --pin ” built the default kernel.
type strictFlag struct {
	value *string
	set   bool
	want  func() string // what a value must be, for the messages
}

func (f *strictFlag) String() string {
	if f == nil || f.value == nil {
		return ""
	}
	return *f.value
}

func (f *strictFlag) Set(s string) error {
	if s == "" {
		return fmt.Errorf("an empty value names nothing; want %s", f.want())
	}
	if f.set && s != *f.value {
		return fmt.Errorf("given twice, as %q and %q; give it once", *f.value, s)
	}
	*f.value, f.set = s, true
	return nil
}

// strictVar defines a strictFlag on fs storing into p, which starts as def.
func strictVar(fs *flag.FlagSet, p *string, name, def, usage string, want func() string) {
	*p = def
	fs.Var(&strictFlag{value: p, want: want}, name, usage)
}

// strictString is strictVar into a new string.
func strictString(fs *flag.FlagSet, name, def, usage string, want func() string) *string {
	p := new(string)
	strictVar(fs, p, name, def, usage, want)
	return p
}

// strictList is a repeatable string flag that refuses an empty value.
type strictList struct {
	values *multiFlag
	want   func() string
}

func (l strictList) String() string {
	if l.values == nil {
		return ""
	}
	return l.values.String()
}

func (l strictList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("an empty value names nothing; want %s", l.want())
	}
	return l.values.Set(s)
}

// The want functions say what a strict flag takes.

func wantHash() string { return "the sha256:<hex> that lockstep policy hash prints" }

func wantBaseDir() string { return "the directory holding the Base*.cfg files" }
func wantPin() string     { return "one of the pins " + pinList() + " (kernel/pins.txt)" }

func wantKernel() string { return "a pin (" + pinList() + ") or a bzImage file" }

func wantKernelOrHost() string { return "host, a pin (" + pinList() + ") or a bzImage file" }

func pinList() string {
	var vs []string
	all, err := kernel.AllPins()
	if err != nil {
		all = kernel.Pins()
	}
	for _, p := range all {
		vs = append(vs, p.Version)
	}
	return strings.Join(vs, ", ")
}
