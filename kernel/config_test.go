package kernel

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// guestNeeds is what the guest and the issue require of every pinned
// kernel; the fragment must require each, exactly so.
var guestNeeds = []string{
	"CONFIG_64BIT=y", "CONFIG_SMP=y", "CONFIG_PVH=y", "CONFIG_HYPERVISOR_GUEST=y", "CONFIG_PARAVIRT=y", "CONFIG_KVM_GUEST=y",
	"CONFIG_PRINTK=y", "CONFIG_TTY=y", "CONFIG_SERIAL_8250=y", "CONFIG_SERIAL_8250_CONSOLE=y", "CONFIG_VIRTIO_CONSOLE=y",
	"CONFIG_PCI=y", "CONFIG_VIRTIO_PCI=y", "CONFIG_VIRTIO_MMIO=y", "CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y",
	"CONFIG_NET_9P=y", "CONFIG_NET_9P_VIRTIO=y", "CONFIG_9P_FS=y", "CONFIG_OVERLAY_FS=y",
	"CONFIG_TMPFS=y", "CONFIG_TMPFS_XATTR=y", "CONFIG_SHMEM=y", "CONFIG_DEVTMPFS=y", "CONFIG_DEVTMPFS_MOUNT=y",
	"CONFIG_PROC_FS=y", "CONFIG_PROC_SYSCTL=y", "CONFIG_SYSFS=y", "CONFIG_SECURITYFS=y",
	"CONFIG_BLK_DEV_INITRD=y", "CONFIG_RD_GZIP=y", "CONFIG_RD_ZSTD=y", "CONFIG_BINFMT_ELF=y", "CONFIG_BINFMT_SCRIPT=y",
	"CONFIG_SECURITY=y", "CONFIG_SECURITY_LANDLOCK=y", "CONFIG_SECURITY_NETWORK=y", "CONFIG_SECURITY_PATH=y",
	"CONFIG_AUDIT=y", "CONFIG_AUDITSYSCALL=y", `CONFIG_LSM="landlock"`, "CONFIG_SECCOMP=y", "CONFIG_SECCOMP_FILTER=y",
	"CONFIG_NET=y", "CONFIG_INET=y", "CONFIG_IPV6=y", "CONFIG_UNIX=y",
	"CONFIG_CGROUPS=y", "CONFIG_MEMCG=y", "CONFIG_CGROUP_PIDS=y", "CONFIG_NAMESPACES=y", "CONFIG_MULTIUSER=y",
	"CONFIG_FUTEX=y", "CONFIG_EPOLL=y", "CONFIG_SIGNALFD=y", "CONFIG_TIMERFD=y", "CONFIG_EVENTFD=y",
	"CONFIG_POSIX_TIMERS=y", "CONFIG_FILE_LOCKING=y", "CONFIG_UNIX98_PTYS=y",
}

func TestFragmentRequiresGuestNeeds(t *testing.T) {
	req := RequiredOptions(Fragment())
	if missing := MissingOptions([]byte(strings.Join(req, "\n")), guestNeeds); len(missing) > 0 {
		t.Errorf("fragment.config does not require %s", strings.Join(missing, ", "))
	}
	for _, r := range req {
		if strings.HasSuffix(r, "=m") {
			t.Errorf("fragment.config asks for a module: %s (everything is built in)", r)
		}
	}
}

func TestRequiredOptions(t *testing.T) {
	frag := "# comment\nCONFIG_A=y\n# CONFIG_B is not set\n  CONFIG_LSM=\"landlock\"  \nCONFIG_A=y\nnot a line\n"
	got := RequiredOptions([]byte(frag))
	want := []string{"CONFIG_A=y", `CONFIG_LSM="landlock"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RequiredOptions(%q) = %q, want %q", frag, got, want)
	}
}

func TestCheckConfig(t *testing.T) {
	req := []string{"CONFIG_A=y", "CONFIG_B=y", `CONFIG_LSM="landlock"`, "CONFIG_D=y"}
	tests := []struct {
		Name    string
		Config  string
		Missing []string
		Found   []string
	}{
		{"AllPresent", "CONFIG_A=y\r\nCONFIG_B=y\nCONFIG_LSM=\"landlock\"\nCONFIG_D=y\n", nil, nil},
		{"ModuleIsNotBuiltIn", "CONFIG_A=m\nCONFIG_B=y\nCONFIG_LSM=\"landlock\"\nCONFIG_D=y\n", []string{"CONFIG_A=y"}, []string{"CONFIG_A=m"}},
		{"OtherLSMList", "CONFIG_A=y\nCONFIG_B=y\nCONFIG_LSM=\"landlock,yama\"\nCONFIG_D=y\n",
			[]string{`CONFIG_LSM="landlock"`}, []string{`CONFIG_LSM="landlock,yama"`}},
		{"AllMissingListed", "# CONFIG_A is not set\nCONFIG_AB=y\n", req, []string{"not set", "not set", "not set", "not set"}},
		{"PrefixIsNotEnough", "CONFIG_A=yes\nCONFIG_B=y\nCONFIG_LSM=\"landlock\"\n CONFIG_D=y\n",
			[]string{"CONFIG_A=y", "CONFIG_D=y"}, []string{"CONFIG_A=yes", "not set"}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			err := CheckConfig(".config", []byte(tt.Config), req)
			if tt.Missing == nil {
				if err != nil {
					t.Fatalf("CheckConfig = %v, want nil", err)
				}
				return
			}
			var u *UnfitError
			if !errors.As(err, &u) || !errors.Is(err, ErrUnfit) {
				t.Fatalf("CheckConfig = %v, want *UnfitError that Is ErrUnfit", err)
			}
			if !reflect.DeepEqual(u.Missing, tt.Missing) || !reflect.DeepEqual(u.Found, tt.Found) {
				t.Errorf("CheckConfig missing %q found %q, want %q %q", u.Missing, u.Found, tt.Missing, tt.Found)
			}
			for _, m := range tt.Missing {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
		})
	}
}

// TestCapturedConfigIsFit checks the configuration a real build produced
// (testdata/README.md says how it was captured) against the fragment.
func TestCapturedConfigIsFit(t *testing.T) {
	cfg, err := os.ReadFile("testdata/config-7.2.13-lockstep")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConfig("testdata/config-7.2.13-lockstep", cfg, RequiredOptions(Fragment())); err != nil {
		t.Errorf("%v (fragment.config changed? recapture as testdata/README.md says)", err)
	}
	for _, off := range []string{"CONFIG_MODULES=y", "CONFIG_ACPI=y", "CONFIG_X86_32=y"} {
		if MissingOptions(cfg, []string{off}) == nil {
			t.Errorf("captured config has %s, want it off", off)
		}
	}
}

func BenchmarkMissingOptions(b *testing.B) {
	cfg, err := os.ReadFile("testdata/config-7.2.13-lockstep")
	if err != nil {
		b.Fatal(err)
	}
	req := RequiredOptions(Fragment())
	b.ReportAllocs()
	for b.Loop() {
		if m := MissingOptions(cfg, req); len(m) != 0 {
			b.Fatal(m)
		}
	}
}
