package enforcer

import (
	"slices"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/mountinfo"
)

// TestInitWithoutShell: without /bin/sh the PID namespace's init is
// InitMain: the command is not PID 1 but its child, sees its own /proc,
// and its status comes back through the init, an exit status and a
// signal (128+n) alike.
func TestInitWithoutShell(t *testing.T) {
	needHostLandlock(t)
	saved := initShell
	initShell = "/nonexistent/sh"
	defer func() { initShell = saved }()
	rules := baseRules + "[read]\n/bin\n/proc\n[execute]\n/bin\n"
	r := runUnder(t, rules, nil, "/bin/sh", "-c", `[ "$PPID" = 1 ] && [ -e /proc/1 ] && [ "$(cat /proc/1/comm)" != sh ] && exit 7`)
	if r.status != 7 || r.err != nil {
		t.Errorf("the command under InitMain = %d, %v; want 7 (its parent is PID 1, not a shell)\nstderr: %s", r.status, r.err, r.stderr)
	}
	r = runUnder(t, rules, nil, "/bin/sh", "-c", `kill -TERM $$`)
	if r.status != 128+15 || r.err != nil {
		t.Errorf("a command that SIGTERMs itself under InitMain = %d, %v; want 143", r.status, r.err)
	}
}

// TestParseMountPoints: the mount points of a mountinfo text, each once,
// with the kernel's octal escapes undone.
func TestParseMountPoints(t *testing.T) {
	info := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
24 22 0:40 / /mnt/with\040space rw - tmpfs tmpfs rw
25 22 0:41 / /mnt/back\134slash rw - tmpfs tmpfs rw
26 22 0:42 / /dev rw - tmpfs tmpfs rw
`
	want := []string{"/", "/dev", "/mnt/with space", `/mnt/back\slash`}
	ms, err := mountinfo.Parse([]byte(info))
	if err != nil {
		t.Fatal(err)
	}
	if got := distinctPoints(ms); !slices.Equal(got, want) {
		t.Errorf("distinctPoints = %q, want %q", got, want)
	}
}

// TestParseLayers: --without takes the table's names, comma-separated,
// each once; anything else is refused naming the layers there are.
func TestParseLayers(t *testing.T) {
	if got, err := ParseLayers("pid,mounts,pid"); err != nil || !slices.Equal(got, []string{"pid", "mounts"}) {
		t.Errorf("ParseLayers(pid,mounts,pid) = %q, %v", got, err)
	}
	if _, err := ParseLayers("mounts,net"); err == nil {
		t.Error("ParseLayers(mounts,net) accepted net")
	}
	if off, err := switchedOff([]string{LayerPID}); err != nil || !slices.Equal(off, []string{LayerPID, LayerMemfd}) {
		t.Errorf("switchedOff(pid) = %q, %v; want pid and memfd", off, err)
	}
}
