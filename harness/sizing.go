package harness

import "time"

// Sizing is what a workload's host side asks of every guest it boots: the
// root, the accelerator, vCPUs, memory and the deadlines. Workloads embed it
// in their HostOptions, and Apply hands it to each guest's Options; each
// field is as in Options, zero included.
type Sizing struct {
	Root        string
	Accel       string
	CPUs        int
	MemMB       int
	Timeout     time.Duration
	BootTimeout time.Duration
}

// Apply sets o's sizing fields from s.
func (s Sizing) Apply(o *Options) {
	o.Root, o.Accel, o.CPUs, o.MemMB, o.Timeout, o.BootTimeout = s.Root, s.Accel, s.CPUs, s.MemMB, s.Timeout, s.BootTimeout
}

// Boot is what a kernel needs besides its bzImage: a distribution kernel's
// modules (files PID 1 loads, in order; ResolveModules) and the machine it
// boots on (MachineQ35: Debian's kernels find their virtio devices on PCI).
// The zero value is a kernel with everything built in, on the default
// machine.
type Boot struct {
	Modules []string
	Machine string
}

// Apply sets o's Modules and Machine from b.
func (b Boot) Apply(o *Options) { o.Modules, o.Machine = b.Modules, b.Machine }
