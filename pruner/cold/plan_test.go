package cold

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/mountinfo"
)

// captured reads a mountinfo captured from a real run (testdata/*.mountinfo;
// the first line is the command that produced it).
func captured(t *testing.T, name string) []mountinfo.Mount {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("#")) {
			lines = append(lines, l)
		}
	}
	ms, err := mountinfo.Parse(bytes.Join(lines, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func stepAt(steps []Step, path string) (Step, bool) {
	for _, s := range steps {
		if s.Path == path {
			return s, true
		}
	}
	return Step{}, false
}

// TestPlanContainer plans the prune container's tree: the root and the
// writable volume become overlays, the read-only exercises and the
// masked /proc entries are bound, /etc/hosts (a writable file) is an
// overlay step that Enter turns into a copy, the keep paths pass through.
func TestPlanContainer(t *testing.T) {
	ms := captured(t, "container.mountinfo")
	steps, err := Plan(ms, []string{"/var/tmp/testing-dir", "/tmp/lockstep-prune-1"}, "/tmp/lockstep-cold-1")
	if err != nil {
		t.Fatal(err)
	}
	if steps[0] != (Step{Kind: Overlay, Path: "/", FSType: "overlay"}) {
		t.Errorf("first step %+v, want the root's overlay", steps[0])
	}
	want := map[string]Kind{"/out": Overlay, "/exercises": Bind, "/etc/hosts": Overlay, "/etc/hostname": Overlay, "/run/.containerenv": Overlay,
		"/proc": RBind, "/sys": RBind, "/dev": RBind, "/var/tmp/testing-dir": RBind, "/tmp/lockstep-prune-1": RBind}
	for p, k := range want {
		st, ok := stepAt(steps, p)
		if !ok || st.Kind != k {
			t.Errorf("%s: step %+v (found %v), want %s", p, st, ok, k)
		}
	}
	for _, p := range []string{"/proc/sys", "/dev/pts", "/sys/fs/cgroup/cpu"} {
		if st, ok := stepAt(steps, p); ok {
			t.Errorf("%s has a step of its own (%+v); it is part of its tree's rbind", p, st)
		}
	}
	if len(steps) != 1+len(want) {
		t.Errorf("%d steps, want %d: %+v", len(steps), 1+len(want), steps)
	}
}

// TestPlanHost plans this kind of host's tree: mounts beneath a keep path
// or the stage get no step, parents come before children, the last mount
// at a path wins.
func TestPlanHost(t *testing.T) {
	ms := captured(t, "host.mountinfo")
	ms = append(ms, mountinfo.Mount{Point: "/srv/data", FSType: "ext4"}, mountinfo.Mount{Point: "/srv/data", FSType: "squashfs", ReadOnly: true},
		mountinfo.Mount{Point: "/tmp/lockstep-cold-1/x", FSType: "tmpfs"}, mountinfo.Mount{Point: "/var/tmp/testing-dir/sub", FSType: "tmpfs"})
	steps, err := Plan(ms, []string{"/var/tmp/testing-dir"}, "/tmp/lockstep-cold-1")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := stepAt(steps, "/srv/data"); st.Kind != Bind || st.FSType != "squashfs" {
		t.Errorf("/srv/data: %+v, want the last mount there (read-only squashfs) bound", st)
	}
	for _, p := range []string{"/tmp/lockstep-cold-1/x", "/var/tmp/testing-dir/sub"} {
		if _, ok := stepAt(steps, p); ok {
			t.Errorf("%s has a step; it lies beneath the stage or a keep path", p)
		}
	}
	if st, _ := stepAt(steps, "/run/netns"); st.Kind != Overlay {
		t.Errorf("/run/netns: %+v, want an overlay (a writable ext4 directory)", st)
	}
	var ns []Step
	for _, s := range steps {
		if s.FSType == "nsfs" {
			ns = append(ns, s)
		}
	}
	if len(ns) == 0 || slices.ContainsFunc(ns, func(s Step) bool { return s.Kind != Bind }) {
		t.Errorf("nsfs mounts %+v, want each bound", ns)
	}
	for i := 1; i < len(steps); i++ {
		if depth(steps[i].Path) < depth(steps[i-1].Path) {
			t.Errorf("step %d (%s) comes after the deeper %s", i, steps[i].Path, steps[i-1].Path)
		}
	}
}

func TestPlanRefusesOverlap(t *testing.T) {
	for _, c := range [][2]string{{"/tmp/s", "/tmp"}, {"/tmp/s", "/tmp/s/k"}, {"/tmp/s", "/tmp/s"}, {"rel", "/k"}, {"/s", "/"}} {
		if _, err := Plan(nil, []string{c[1]}, c[0]); err == nil {
			t.Errorf("stage %s, keep %s: planned, want a refusal", c[0], c[1])
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	for _, name := range []string{"container.mountinfo", "host.mountinfo"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("1 2 3 4 /a\\134b rw - t s o"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := mountinfo.Parse(data)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.Point == "" || m.Point[0] != '/' || m.FSType == "" {
				t.Fatalf("parsed %+v from %q", m, data)
			}
		}
		if _, err := Plan(ms, []string{"/var/tmp/w"}, "/tmp/s"); err != nil {
			t.Fatalf("plan of parsed mounts: %v", err)
		}
	})
}
