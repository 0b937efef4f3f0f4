package harness

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Machine types the harness knows how to boot.
const (
	// MachineMicrovm is QEMU's microvm: no PCI, no firmware tables, qboot
	// instead of SeaBIOS, virtio over MMIO announced on the kernel command
	// line. The fast default.
	MachineMicrovm = "microvm"
	// MachineQ35 is the PC machine with PCI and SeaBIOS; the fallback for
	// kernels without virtio-mmio.
	MachineQ35 = "q35"
)

// Accelerators.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
	// AccelAuto probes KVM by booting and falls back to TCG.
	AccelAuto = "auto"
)

// Share9P is one host directory exported to the guest over 9p, read-only.
type Share9P struct {
	// Tag is the mount tag the guest mounts by; at most 31 bytes.
	Tag string
	// Path is the host directory.
	Path string
}

// SerialPort is one virtio-serial port whose host end is a unix socket the
// harness listens on (QEMU connects to it as a client).
type SerialPort struct {
	// Name is the port name the guest finds in /sys/class/virtio-ports.
	Name string
	// Socket is the host unix socket path.
	Socket string
}

// QEMUConfig is everything that goes on QEMU's command line. [QEMUConfig.Args]
// turns it into argv; the zero value of each field is documented.
type QEMUConfig struct {
	// Binary is the QEMU executable; "" is "qemu-system-x86_64" from PATH.
	Binary string
	// Name names the guest (-name), which also marks its process; required.
	Name string
	// Machine is MachineMicrovm or MachineQ35; "" is MachineMicrovm.
	Machine string
	// Accel is AccelKVM or AccelTCG; required (auto is resolved before).
	Accel string
	// CPU is the CPU model (-cpu); "" is "host" under KVM and "max" under
	// TCG.
	CPU string
	// MemMB is the guest memory in MiB; at least 64.
	MemMB int
	// CPUs is the number of vCPUs; at least 1.
	CPUs int
	// Kernel and Initramfs are host file paths; Kernel is required.
	Kernel    string
	Initramfs string
	// Append is the kernel command line.
	Append string
	// ConsoleLog is the file the guest's ttyS0 is written to; required.
	ConsoleLog string
	// QMPSocket is the unix socket QEMU serves QMP on; "" means no QMP.
	QMPSocket string
	// Shares are read-only 9p exports.
	Shares []Share9P
	// Disks are raw disk images attached read-only as virtio-blk devices,
	// in order: the first is /dev/vda in the guest.
	Disks []string
	// Ports are virtio-serial ports.
	Ports []SerialPort
	// RNG adds a virtio RNG so the guest never waits for entropy.
	RNG bool
}

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// Args returns QEMU's argv without the binary. It refuses an invalid
// configuration, naming every problem at once.
func (c QEMUConfig) Args() ([]string, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	a := []string{
		"-name", c.Name,
		"-nodefaults", "-no-user-config", "-display", "none",
		"-nic", "none",
		"-no-reboot",
	}
	a = append(a, c.machineArgs()...)
	a = append(a, c.bootArgs()...)
	a = append(a, c.chardevArgs()...)
	return append(a, c.deviceArgs()...), nil
}

// machine is c.Machine, "" being MachineMicrovm.
func (c QEMUConfig) machine() string {
	if c.Machine == "" {
		return MachineMicrovm
	}
	return c.Machine
}

// virtioDevice is the virtio device of kind on c's transport: MMIO on
// microvm, PCI elsewhere.
func (c QEMUConfig) virtioDevice(kind string) string {
	if c.machine() == MachineMicrovm {
		return "virtio-" + kind + "-device"
	}
	return "virtio-" + kind + "-pci"
}

// machineArgs are the machine, its accelerator, the CPU model and count.
func (c QEMUConfig) machineArgs() []string {
	var a []string
	switch c.machine() {
	case MachineMicrovm:
		// acpi=off: devices are announced on the kernel command line
		// (virtio_mmio.device=…), which needs no ACPI in the kernel.
		// The PIT and PIC stay on: microvm without them wedges under TCG.
		a = append(a, "-machine", "microvm,accel="+c.Accel+",acpi=off,x-option-roms=off,isa-serial=on,rtc=on,pit=on,pic=on")
	case MachineQ35:
		a = append(a, "-machine", "q35,accel="+c.Accel)
	}
	cpu := c.CPU
	switch {
	case cpu != "":
	case c.Accel == AccelKVM:
		cpu = "host"
	default:
		cpu = tcgCPU
	}
	// One core per socket: a kernel without ACPI (ours) counts CPUs from
	// the firmware's MP table, which holds one core per socket, and QEMU
	// since 6.2 puts -smp n into cores of one socket, so q35's SeaBIOS
	// listed one CPU and `--cpus 2` gave a guest of one (measured here).
	n := strconv.Itoa(c.CPUs)
	return append(a,
		"-cpu", cpu,
		"-smp", n+",sockets="+n+",cores=1,threads=1",
		"-m", strconv.Itoa(c.MemMB),
	)
}

// bootArgs are the kernel, the initramfs and the command line.
func (c QEMUConfig) bootArgs() []string {
	a := []string{"-kernel", c.Kernel}
	if c.Initramfs != "" {
		a = append(a, "-initrd", c.Initramfs)
	}
	return append(a, "-append", c.Append)
}

// chardevArgs are the console log and the QMP socket.
func (c QEMUConfig) chardevArgs() []string {
	a := []string{
		"-chardev", "file,id=console,path=" + escape(c.ConsoleLog),
		"-serial", "chardev:console",
	}
	if c.QMPSocket != "" {
		a = append(a,
			"-chardev", "socket,id=qmp,path="+escape(c.QMPSocket)+",server=on,wait=off",
			"-mon", "chardev=qmp,mode=control",
		)
	}
	return a
}

// deviceArgs are the 9p shares, the disks, the serial ports and the RNG.
func (c QEMUConfig) deviceArgs() []string {
	var a []string
	for i, s := range c.Shares {
		id := "fs" + strconv.Itoa(i)
		a = append(a,
			"-fsdev", "local,id="+id+",path="+escape(s.Path)+",readonly=on,security_model=none,multidevs=remap",
			"-device", c.virtioDevice("9p")+",fsdev="+id+",mount_tag="+escape(s.Tag),
		)
	}
	for i, d := range c.Disks {
		id := "disk" + strconv.Itoa(i)
		a = append(a,
			"-drive", "file="+escape(d)+",format=raw,if=none,id="+id+",readonly=on",
			"-device", c.virtioDevice("blk")+",drive="+id,
		)
	}
	if len(c.Ports) > 0 {
		a = append(a, "-device", c.virtioDevice("serial")+",id=vser0,max_ports="+strconv.Itoa(len(c.Ports)+1))
		for i, p := range c.Ports {
			id := "port" + strconv.Itoa(i)
			a = append(a,
				"-chardev", "socket,id="+id+",path="+escape(p.Socket),
				"-device", "virtserialport,bus=vser0.0,nr="+strconv.Itoa(i+1)+",chardev="+id+",name="+escape(p.Name),
			)
		}
	}
	if c.RNG {
		a = append(a, "-device", c.virtioDevice("rng"))
	}
	return a
}

// escape doubles commas, QEMU's option-value escape.
func escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// configProblems collects every problem of a configuration.
type configProblems []error

func (p *configProblems) add(format string, a ...any) { *p = append(*p, fmt.Errorf(format, a...)) }

func (c QEMUConfig) validate() error {
	var bad configProblems
	c.validateMachine(&bad)
	c.validateDevices(&bad)
	return errors.Join(bad...)
}

// validateMachine checks the name, machine, accelerator, sizes, kernel,
// console and QMP socket.
func (c QEMUConfig) validateMachine(bad *configProblems) {
	if c.Name == "" || strings.ContainsAny(c.Name, ", ") {
		bad.add("guest name %q: want a non-empty name without commas or spaces", c.Name)
	}
	switch c.Machine {
	case "", MachineMicrovm, MachineQ35:
	default:
		bad.add("machine %q: want %s or %s", c.Machine, MachineMicrovm, MachineQ35)
	}
	switch c.Accel {
	case AccelKVM, AccelTCG:
	default:
		bad.add("accel %q: want %s or %s (resolve auto first)", c.Accel, AccelKVM, AccelTCG)
	}
	if c.MemMB < 64 {
		bad.add("memory %d MiB: want at least 64", c.MemMB)
	}
	if strings.ContainsAny(c.CPU, " \t\n") {
		bad.add("CPU model %q: want a model and its features as -cpu takes them, without spaces", c.CPU)
	}
	if c.CPUs < 1 || c.CPUs > 64 {
		bad.add("vCPUs %d: want 1 to 64", c.CPUs)
	}
	if c.Kernel == "" {
		bad.add("no kernel: want a bzImage path")
	}
	if c.ConsoleLog == "" {
		bad.add("no console log path")
	}
	if len(c.QMPSocket) > maxSocketPath {
		bad.add("QMP socket path %q is %d bytes: want at most %d", c.QMPSocket, len(c.QMPSocket), maxSocketPath)
	}
}

// validateDevices checks the shares' tags and paths, the disks' paths and
// the serial ports' names and sockets.
func (c QEMUConfig) validateDevices(bad *configProblems) {
	tags := map[string]bool{}
	for _, s := range c.Shares {
		if s.Tag == "" || len(s.Tag) > 31 {
			bad.add("9p tag %q: want 1 to 31 bytes", s.Tag)
		}
		if tags[s.Tag] {
			bad.add("9p tag %q used twice", s.Tag)
		}
		tags[s.Tag] = true
		if s.Path == "" {
			bad.add("9p share %q has no host path", s.Tag)
		}
	}
	for _, d := range c.Disks {
		if d == "" {
			bad.add("disk without a host path")
		}
	}
	names := map[string]bool{}
	for _, p := range c.Ports {
		if p.Name == "" {
			bad.add("virtio-serial port without a name")
		}
		if names[p.Name] {
			bad.add("virtio-serial port %q used twice", p.Name)
		}
		names[p.Name] = true
		if p.Socket == "" || len(p.Socket) > maxSocketPath {
			bad.add("virtio-serial port %q socket %q: want 1 to %d bytes", p.Name, p.Socket, maxSocketPath)
		}
	}
}
