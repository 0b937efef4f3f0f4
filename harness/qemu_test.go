package harness

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
	"github.com/digitalocean/go-qemu/qmp/qmptest"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
)

func baseConfig() QEMUConfig {
	return QEMUConfig{
		Name: "lockstep-t", Accel: AccelTCG, MemMB: 256, CPUs: 2, Kernel: "/k/bzImage", Initramfs: "/t/initramfs",
		Append: "console=ttyS0 quiet", ConsoleLog: "/t/console.log", QMPSocket: "/t/qmp.sock",
		Shares: []Share9P{{Tag: "lockstep.root", Path: "/"}},
		Ports:  []SerialPort{{Name: "lockstep.events", Socket: "/t/ev.sock"}, {Name: "lockstep.results", Socket: "/t/res.sock"}},
		RNG:    true,
	}
}

// hasPair reports whether argv has flag immediately followed by value.
func hasPair(argv []string, flag, value string) bool {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == flag && argv[i+1] == value {
			return true
		}
	}
	return false
}

func TestQEMUArgs(t *testing.T) {
	type pair struct{ flag, value string }
	for _, tc := range []struct {
		Name   string
		Modify func(*QEMUConfig)
		Want   []pair // each must appear (order-insensitive)
		Absent []string
	}{
		{
			Name: "always",
			Want: []pair{{"-no-reboot", "-nic"}, {"-nic", "none"}, {"-display", "none"}, {"-name", "lockstep-t"},
				{"-serial", "chardev:console"}, {"-chardev", "file,id=console,path=/t/console.log"},
				{"-kernel", "/k/bzImage"}, {"-initrd", "/t/initramfs"}, {"-append", "console=ttyS0 quiet"},
				{"-m", "256"}, {"-smp", "2,sockets=2,cores=1,threads=1"}},
		},
		{
			Name: "microvm uses virtio-mmio and keeps the PIT under TCG",
			Want: []pair{{"-machine", "microvm,accel=tcg,acpi=off,x-option-roms=off,isa-serial=on,rtc=on,pit=on,pic=on"},
				{"-device", "virtio-9p-device,fsdev=fs0,mount_tag=lockstep.root"},
				{"-device", "virtio-serial-device,id=vser0,max_ports=3"}, {"-device", "virtio-rng-device"}, {"-cpu", "max"}},
			Absent: []string{"virtio-9p-pci", "virtio-serial-pci"},
		},
		{
			Name: "a root image is a read-only virtio-blk disk",
			Modify: func(c *QEMUConfig) {
				c.Machine = MachineQ35
				c.Shares = nil
				c.Disks = []string{"/img/root,1.ext4"}
			},
			Want: []pair{{"-drive", "file=/img/root,,1.ext4,format=raw,if=none,id=disk0,readonly=on"},
				{"-device", "virtio-blk-pci,drive=disk0"}},
			Absent: []string{"virtio-9p-pci"},
		},
		{
			Name:   "q35 uses virtio-pci",
			Modify: func(c *QEMUConfig) { c.Machine = MachineQ35 },
			Want: []pair{{"-machine", "q35,accel=tcg"}, {"-device", "virtio-9p-pci,fsdev=fs0,mount_tag=lockstep.root"},
				{"-device", "virtio-serial-pci,id=vser0,max_ports=3"}, {"-device", "virtio-rng-pci"}},
			Absent: []string{"virtio-9p-device"},
		},
		{
			Name:   "kvm uses the host CPU unless told",
			Modify: func(c *QEMUConfig) { c.Accel = AccelKVM },
			Want:   []pair{{"-cpu", "host"}},
		},
		{
			Name:   "the CPU model given is passed as is",
			Modify: func(c *QEMUConfig) { c.Accel = AccelKVM; c.CPU = "host,-xsave" },
			Want:   []pair{{"-cpu", "host,-xsave"}},
		},
		{
			Name: "9p root is read-only and remaps devices",
			Want: []pair{{"-fsdev", "local,id=fs0,path=/,readonly=on,security_model=none,multidevs=remap"}},
		},
		{
			Name: "serial ports connect to the harness's sockets",
			Want: []pair{{"-chardev", "socket,id=port0,path=/t/ev.sock"}, {"-device", "virtserialport,bus=vser0.0,nr=1,chardev=port0,name=lockstep.events"},
				{"-chardev", "socket,id=port1,path=/t/res.sock"}, {"-device", "virtserialport,bus=vser0.0,nr=2,chardev=port1,name=lockstep.results"}},
		},
		{
			Name: "QMP on a private socket",
			Want: []pair{{"-chardev", "socket,id=qmp,path=/t/qmp.sock,server=on,wait=off"}, {"-mon", "chardev=qmp,mode=control"}},
		},
		{
			Name:   "commas in paths are doubled",
			Modify: func(c *QEMUConfig) { c.Shares[0].Path = "/a,b"; c.ConsoleLog = "/c,d" },
			Want:   []pair{{"-fsdev", "local,id=fs0,path=/a,,b,readonly=on,security_model=none,multidevs=remap"}, {"-chardev", "file,id=console,path=/c,,d"}},
		},
		{
			Name:   "no initramfs, no QMP, no ports, no RNG",
			Modify: func(c *QEMUConfig) { c.Initramfs = ""; c.QMPSocket = ""; c.Ports = nil; c.RNG = false },
			Absent: []string{"-initrd", "-mon", "virtio-serial-device", "virtio-rng-device"},
		},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			c := baseConfig()
			if tc.Modify != nil {
				tc.Modify(&c)
			}
			argv, err := c.Args()
			if err != nil {
				t.Fatalf("Args() = %v", err)
			}
			for _, w := range tc.Want {
				if w.flag == "-no-reboot" {
					if !slices.Contains(argv, "-no-reboot") {
						t.Errorf("Args() lacks -no-reboot: %q", argv)
					}
					continue
				}
				if !hasPair(argv, w.flag, w.value) {
					t.Errorf("Args() lacks %s %s:\n%s", w.flag, w.value, shellquote.Join(argv))
				}
			}
			for _, a := range tc.Absent {
				for _, arg := range argv {
					if strings.Contains(arg, a) {
						t.Errorf("Args() has %q, want none: %s", a, shellquote.Join(argv))
					}
				}
			}
			if slices.Contains(argv, "-device") && slices.ContainsFunc(argv, func(s string) bool { return strings.HasPrefix(s, "isa-serial") }) {
				t.Errorf("Args() adds an isa-serial device, which drops QEMU's serial: %q", argv)
			}
		})
	}
}

func TestQEMUArgsRefusesEveryProblem(t *testing.T) {
	c := QEMUConfig{Machine: "pc", Accel: "auto", MemMB: 10, CPUs: 0,
		Shares: []Share9P{{Tag: "t", Path: "/"}, {Tag: "t"}},
		Ports:  []SerialPort{{Name: "p", Socket: strings.Repeat("x", 200)}}}
	_, err := c.Args()
	if err == nil {
		t.Fatal("Args() of a bad config succeeded")
	}
	for _, want := range []string{"guest name", "machine \"pc\"", "accel \"auto\"", "memory 10", "vCPUs 0", "no kernel", "no console log", "used twice", "no host path", "socket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Args() error lacks %q:\n%v", want, err)
		}
	}
}

func TestKernelCmdline(t *testing.T) {
	for _, tc := range []struct {
		Name    string
		Verbose bool
		Hook    string
		Want    string
	}{
		{"quiet", false, "", "console=ttyS0 panic=-1 reboot=t no_timer_check lsm=landlock audit=1 audit_backlog_limit=8192 lockstep.job=ab quiet"},
		{"verbose", true, "", "console=ttyS0 panic=-1 reboot=t no_timer_check lsm=landlock audit=1 audit_backlog_limit=8192 lockstep.job=ab"},
		{"hook", false, "hang-boot", "console=ttyS0 panic=-1 reboot=t no_timer_check lsm=landlock audit=1 audit_backlog_limit=8192 lockstep.job=ab quiet lockstep.hook=hang-boot"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			if got := kernelCmdline("ab", tc.Verbose, tc.Hook); got != tc.Want {
				t.Errorf("kernelCmdline = %q, want %q", got, tc.Want)
			}
		})
	}
}

func TestConsoleLines(t *testing.T) {
	var b strings.Builder
	for i := range 150 {
		b.WriteString("line " + string(rune('a'+i%26)) + "\r\n")
	}
	got := consoleLines([]byte(b.String()), 100)
	if len(got) != 100 || strings.Contains(got[99], "\r") || got[99] != "line "+string(rune('a'+149%26)) {
		t.Errorf("consoleLines kept %d lines ending %q", len(got), got[len(got)-1])
	}
	if got := consoleLines(nil, 5); got != nil {
		t.Errorf("consoleLines(nil) = %q, want nil", got)
	}
}

func TestForensicsFromFakeMonitor(t *testing.T) {
	var seen []string
	mon := qmptest.NewMonitor(func(cmd qmp.Command) (any, error) {
		seen = append(seen, cmd.Execute)
		switch cmd.Execute {
		case "query-status":
			return map[string]any{"return": map[string]any{"status": "running", "running": true}}, nil
		case "human-monitor-command":
			return map[string]any{"return": "CPU#0\r\nRAX=0000000000000000 RBX=0000000000000001\r\n"}, nil
		}
		return nil, errors.New("unexpected " + cmd.Execute)
	})
	m := &monitor{mon: mon, timeout: time.Second}
	text := forensics(m, "the boot phase passed its 30s deadline", []string{"qemu-system-x86_64", "-m", "256"}, []string{"[    0.1] Linux version 7.2.13", "last line"})
	for _, want := range []string{"reason: the boot phase passed its 30s deadline", "query-status: running", "RAX=0000000000000000", "console, last 2 lines:\n[    0.1] Linux version 7.2.13\nlast line\n", "qemu: qemu-system-x86_64 -m 256"} {
		if !strings.Contains(text, want) {
			t.Errorf("forensics lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\r") {
		t.Error("forensics keeps carriage returns")
	}
	if !slices.Equal(seen, []string{"query-status", "human-monitor-command"}) {
		t.Errorf("forensics ran %v", seen)
	}
}

// stuckMonitor never answers, like go-qemu's Run on a wedged QEMU.
type stuckMonitor struct {
	release      chan struct{}
	disconnected bool
}

func (s *stuckMonitor) Connect() error { return nil }
func (s *stuckMonitor) Disconnect() error {
	if !s.disconnected {
		s.disconnected = true
		close(s.release)
	}
	return nil
}
func (s *stuckMonitor) Run([]byte) ([]byte, error) {
	<-s.release
	return nil, errors.New("use of closed network connection")
}
func (s *stuckMonitor) Events(context.Context) (<-chan qmp.Event, error) { return nil, nil }

func TestMonitorDeadline(t *testing.T) {
	s := &stuckMonitor{release: make(chan struct{})}
	m := &monitor{mon: s, timeout: 50 * time.Millisecond}
	start := time.Now()
	_, err := m.status()
	if !errors.Is(err, errQMPTimeout) {
		t.Fatalf("status() on a stuck monitor = %v, want errQMPTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("status() took %v on a 50ms deadline", d)
	}
	if !s.disconnected {
		t.Error("a timed-out monitor was not disconnected")
	}
	if _, err := m.hmp("info registers"); err == nil {
		t.Error("a call after a timeout succeeded")
	}
	text := forensics(m, "r", nil, nil)
	if !strings.Contains(text, "query-status: qmp") {
		t.Errorf("forensics with a dead monitor does not say why:\n%s", text)
	}
}

func TestAccelKernelArgs(t *testing.T) {
	if got := accelKernelArgs(AccelTCG); !slices.Equal(got, []string{"noapictimer"}) {
		t.Errorf("accelKernelArgs(tcg) = %q, want noapictimer", got)
	}
	if got := accelKernelArgs(AccelKVM); len(got) != 0 {
		t.Errorf("accelKernelArgs(kvm) = %q, want none: the APIC timer works under KVM", got)
	}
}
