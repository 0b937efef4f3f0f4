package placement

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// fakeFS is what existed before the run: path → is a directory.
type fakeFS map[string]bool

func (f fakeFS) existed(p string) (bool, bool) { d, ok := f[p]; return ok, d }

var before = fakeFS{
	"/": true, "/usr": true, "/usr/bin": true, "/usr/bin/make": false, "/usr/lib": true,
	"/usr/lib/x86_64-linux-gnu": true, "/usr/lib/x86_64-linux-gnu/libc.so.6": false,
	"/etc": true, "/etc/passwd": false, "/etc/ssl": true, "/tmp": true,
	"/var": true, "/var/tmp": true, "/var/tmp/testing-dir": true, "/var/tmp/testing-dir/src": true,
	"/var/tmp/testing-dir/src/a.sh": false, "/var/tmp/testing-dir/assignment": true,
	"/var/tmp/testing-dir/run.sh": false, "/dev": true, "/dev/null": false, "/proc": true,
	"/usr/bin/we?ird": false, "/opt": true, "/opt/tool": true, "/opt/tool/x": false, "/proc/1/fd/5": false, "/opt/f": false,
}

func env() Env {
	return Env{Existed: before.existed, Scanned: []string{"/var/tmp/testing-dir"},
		CompiledPrograms: "/var/tmp/testing-dir/assignment", Pinned: []string{"/opt/tool"}}
}

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		Name    string
		Path    string
		Section policy.Section
		Want    string // "" means reported
		Reason  string // substring of the report
	}{
		{"file read outside fine roots becomes its directory", "/usr/lib/x86_64-linux-gnu/libc.so.6", policy.Read, "/usr/lib/x86_64-linux-gnu", ""},
		{"program executed becomes its directory", "/usr/bin/make", policy.Execute, "/usr/bin", ""},
		{"file read in a fine root stays a file", "/etc/passwd", policy.Read, "/etc/passwd", ""},
		{"directory read at depth 2", "/etc/ssl", policy.Read, "/etc/ssl", ""},
		{"top-level directory read is never granted whole", "/usr", policy.Read, "", "top-level"},
		{"file directly in a top-level dir stays a file", "/opt/f", policy.Read, "/opt/f", ""},
		{"created file read climbs to the working directory", "/var/tmp/testing-dir/build/out", policy.Read, "/var/tmp/testing-dir", ""},
		{"created file write climbs to the nearest pre-existing dir", "/var/tmp/testing-dir/src/new/x", policy.Write, "/var/tmp/testing-dir/src", ""},
		{"create on an existing directory stays there", "/var/tmp/testing-dir", policy.Create, "/var/tmp/testing-dir", ""},
		{"write on an existing device stays there", "/dev/null", policy.Write, "/dev/null", ""},
		{"write on a specification ancestor is reported", "/var/tmp", policy.Create, "", "working directory's parents"},
		{"a missing object outside the scanned roots is reported", "/tmp/cc123.o", policy.Write, "", "did not exist"},
		{"executing what the run wrote is reported", "/var/tmp/testing-dir/build/prog", policy.Execute, "", "executed what it wrote"},
		{"executing what the run wrote in the compiled-programs dir", "/var/tmp/testing-dir/assignment/prog", policy.Execute, "/var/tmp/testing-dir/assignment", ""},
		{"/proc/self is reported", "/proc/self/maps", policy.Read, "", "/proc/self"},
		{"an uncarriable read widens to a nameable directory", "/usr/bin/we?ird", policy.Read, "/usr/bin", ""},
		{"an uncarriable write is reported", "/var/tmp/testing-dir/a#b", policy.Write, "", "cannot be written"},
		{"a read beneath a pinned root is the root", "/opt/tool/x", policy.Read, "/opt/tool", ""},
		{"a read of a missing file beneath a pinned root is the root", "/opt/tool/lib/gone.pom", policy.Read, "/opt/tool", ""},
		{"a write beneath a pinned root is reported", "/opt/tool/x", policy.Write, "", "pinned read root /opt/tool"},
		{"a program beneath a pinned root is placed as elsewhere", "/opt/tool/x", policy.Execute, "/opt/tool", ""},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			g, r := Place(Observation{Path: tc.Path, Section: tc.Section, Run: 1}, env())
			switch {
			case tc.Want == "" && r == nil:
				t.Errorf("Place(%s, %s) = %s, want a report containing %q", tc.Path, tc.Section, g.Path, tc.Reason)
			case tc.Want == "" && !strings.Contains(r.Reason, tc.Reason):
				t.Errorf("Place(%s, %s) reported %q, want it to contain %q", tc.Path, tc.Section, r.Reason, tc.Reason)
			case tc.Want != "" && r != nil:
				t.Errorf("Place(%s, %s) reported %q, want %s", tc.Path, tc.Section, r.Reason, tc.Want)
			case tc.Want != "" && g.Path != tc.Want:
				t.Errorf("Place(%s, %s) = %s, want %s", tc.Path, tc.Section, g.Path, tc.Want)
			case tc.Want != "" && g.Widened != (g.Path != tc.Path):
				t.Errorf("Place(%s, %s).Widened = %v, want %v", tc.Path, tc.Section, g.Widened, g.Path != tc.Path)
			}
		})
	}
}

func TestGrantsPerRun(t *testing.T) {
	e := env()
	for _, tc := range []struct {
		Name    string
		Obs     []Observation
		Want    []string // "path section"
		Reports int
	}{
		{"own pid under /proc: the stable dir is /proc, a top-level dir, so reported",
			[]Observation{{Path: "/proc/41/maps", Section: policy.Read, Run: 1, TGID: 41, TID: 41}}, nil, 1},
		{"own task under a stable pid: granted on /proc/1/task",
			[]Observation{{Path: "/proc/1/task/77/stat", Section: policy.Read, Run: 1, TGID: 5, TID: 77}}, []string{"/proc/1/task read"}, 0},
		{"a pid that changes over two runs is per-run even if not the refuser's",
			[]Observation{
				{Path: "/proc/1/fd/5", Section: policy.Read, Run: 1, TGID: 9, TID: 9},
				{Path: "/proc/1/fd/6", Section: policy.Read, Run: 2, TGID: 10, TID: 10},
			}, []string{"/proc/1/fd read"}, 0},
		{"a name seen with one value in two runs stays file by file",
			[]Observation{
				{Path: "/proc/1/fd/5", Section: policy.Read, Run: 1, TGID: 9, TID: 9},
				{Path: "/proc/1/fd/5", Section: policy.Read, Run: 2, TGID: 10, TID: 10},
			}, []string{"/proc/1/fd/5 read"}, 0},
		{"pseudo-terminal slaves: read on /dev/pts, write reported",
			[]Observation{
				{Path: "/dev/pts/3", Section: policy.Read, Run: 1},
				{Path: "/dev/pts/3", Section: policy.Write, Run: 1},
			}, []string{"/dev/pts read"}, 1},
		{"ordinary paths are placed and deduplicated",
			[]Observation{
				{Path: "/usr/bin/make", Section: policy.Execute, Run: 1},
				{Path: "/usr/bin/make", Section: policy.Read, Run: 1},
				{Path: "/usr/bin/make", Section: policy.Read, Run: 2},
			}, []string{"/usr/bin execute", "/usr/bin read"}, 0},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			gs, rs := Grants(tc.Obs, e)
			var got []string
			for _, g := range gs {
				got = append(got, g.Path+" "+string(g.Section))
			}
			if !reflect.DeepEqual(got, tc.Want) || len(rs) != tc.Reports {
				t.Errorf("Grants = %v with %d reports %v, want %v with %d", got, len(rs), rs, tc.Want, tc.Reports)
			}
		})
	}
}

// TestGrantsPseudoTerminals: an exercise that declares uses_pseudo_terminals
// opens /dev/pts/<n> read-write and sets it up by ioctl; its [write] and
// [ioctl] are granted on /dev/pts (the c-gcc prune aborted without, "a
// refusal survived its own grant"), never another per-run name's.
func TestGrantsPseudoTerminals(t *testing.T) {
	e := env()
	e.PseudoTerminals = true
	obs := []Observation{
		{Path: "/dev/pts/3", Section: policy.Read, Run: 1},
		{Path: "/dev/pts/3", Section: policy.Write, Run: 1},
		{Path: "/dev/pts/4", Section: policy.Ioctl, Run: 1},
		{Path: "/proc/1/fd/5", Section: policy.Write, Run: 1, TGID: 1, TID: 1},
	}
	gs, rs := Grants(obs, e)
	var got []string
	for _, g := range gs {
		got = append(got, g.Path+" "+string(g.Section))
	}
	want := []string{"/dev/pts ioctl", "/dev/pts read", "/dev/pts write"}
	if !reflect.DeepEqual(got, want) || len(rs) != 1 || rs[0].Object != "/proc/1/fd/5" {
		t.Errorf("Grants = %v, reports %v; want %v and the write on /proc/1/fd/5 reported", got, rs, want)
	}
}

func mustParse(t *testing.T, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("t.cfg", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNarrowExecute(t *testing.T) {
	e := env()
	e.Existed = fakeFS{"/var/tmp/testing-dir": true, "/var/tmp/testing-dir/run.sh": false,
		"/var/tmp/testing-dir/assignment": true, "/usr/bin": true}.existed
	p := mustParse(t, "[read]\n/usr/bin\n/var/tmp/testing-dir\n[execute]\n/usr/bin\n/var/tmp/testing-dir\n/var/tmp/testing-dir/assignment\n[write]\n/var/tmp/testing-dir\n")
	got, reports := NarrowExecute(p, nil, []string{"/var/tmp/testing-dir/run.sh", "/var/tmp/testing-dir/gen.sh"}, e)
	want := map[string]string{
		"/usr/bin":                        "rx",
		"/var/tmp/testing-dir":            "rw",
		"/var/tmp/testing-dir/assignment": "x",
		"/var/tmp/testing-dir/run.sh":     "x",
	}
	for q, l := range want {
		if g := policy.Letters(got.FS[q]); g != l {
			t.Errorf("NarrowExecute: %s holds %q, want %q", q, g, l)
		}
	}
	if len(got.FS) != len(want) {
		t.Errorf("NarrowExecute: %d paths, want %d: %v", len(got.FS), len(want), got.FS)
	}
	if len(reports) != 1 || reports[0].Object != "/var/tmp/testing-dir/gen.sh" {
		t.Errorf("NarrowExecute reports %v, want one for gen.sh (it did not exist before)", reports)
	}
	if !strings.Contains(got.Comments["/var/tmp/testing-dir/run.sh"], "overwritten in place") {
		t.Errorf("run.sh comment %q, want it to say the file can be overwritten", got.Comments["/var/tmp/testing-dir/run.sh"])
	}
	if p.FS["/var/tmp/testing-dir"][policy.Execute] != true {
		t.Error("NarrowExecute changed its input")
	}
}

func TestCompact(t *testing.T) {
	e := env()
	for _, tc := range []struct {
		Name, Src string
		Threshold int
		Want      []string
	}{
		{"three siblings become the parent", "[read]\n/usr/lib/a\n/usr/lib/b\n/usr/lib/c\n", 3, []string{"/usr/lib"}},
		{"two stay below threshold 3", "[read]\n/usr/lib/a\n/usr/lib/b\n", 3, []string{"/usr/lib/a", "/usr/lib/b"}},
		{"never to a top-level directory", "[read]\n/usr/a\n/usr/b\n/usr/c\n", 3, []string{"/usr/a", "/usr/b", "/usr/c"}},
		{"never inside a fine root", "[read]\n/etc/ssl/a\n/etc/ssl/b\n/etc/ssl/c\n", 3, []string{"/etc/ssl/a", "/etc/ssl/b", "/etc/ssl/c"}},
		{"write-class entries are not compacted", "[write]\n/usr/lib/a\n/usr/lib/b\n/usr/lib/c\n", 3, []string{"/usr/lib/a", "/usr/lib/b", "/usr/lib/c"}},
		{"execute not onto a parent that overlaps a write", "[execute]\n/opt/t/a\n/opt/t/b\n/opt/t/c\n[write]\n/opt/t/w\n", 3,
			[]string{"/opt/t/a", "/opt/t/b", "/opt/t/c", "/opt/t/w"}},
		{"repeats upwards", "[read]\n/usr/lib/a/1\n/usr/lib/a/2\n/usr/lib/b/1\n/usr/lib/b/2\n", 2, []string{"/usr/lib"}},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			got, _ := Compact(mustParse(t, tc.Src), nil, tc.Threshold, e)
			var paths []string
			for q := range got.FS {
				paths = append(paths, q)
			}
			paths = uniqueSorted(paths)
			if !reflect.DeepEqual(paths, tc.Want) {
				t.Errorf("Compact(%q) = %v, want %v", tc.Src, paths, tc.Want)
			}
		})
	}
}

// TestCompactKeepsPinnedRoots: a pinned read root is never widened to its
// parent, however many read siblings it has.
func TestCompactKeepsPinnedRoots(t *testing.T) {
	e := env()
	e.Pinned = []string{"/usr/share/maven-repo"}
	src := "[read]\n/usr/share/java\n/usr/share/maven-repo\n/usr/share/zoneinfo\n"
	got, widened := Compact(mustParse(t, src), nil, 3, e)
	if len(widened) != 0 || !got.FS["/usr/share/maven-repo"][policy.Read] || got.FS["/usr/share"] != nil {
		t.Errorf("Compact(%q) widened %v to %v; want the pinned root kept as its own entry", src, widened, got.FS)
	}
	e.Pinned = nil
	if _, widened := Compact(mustParse(t, src), nil, 3, e); len(widened) != 1 {
		t.Errorf("without the pin Compact widened %v, want /usr/share (the test needs a group that compacts)", widened)
	}
}

func TestCovered(t *testing.T) {
	p := mustParse(t, "[read]\n/usr\n[restructure]\n/var/tmp/w\n")
	for _, tc := range []struct {
		Path string
		S    policy.Section
		Want bool
	}{
		{"/usr/bin/x", policy.Read, true},
		{"/usr", policy.Read, true},
		{"/usr/bin/x", policy.Execute, false},
		{"/var/tmp/w/x", policy.Create, true},
		{"/var/tmp/w", policy.Delete, true},
		{"/var/tmp/w", policy.Write, false},
		{"/var/tmp", policy.Create, false},
	} {
		if got := Covered(p, tc.Path, tc.S); got != tc.Want {
			t.Errorf("Covered(%s, %s) = %v, want %v", tc.Path, tc.S, got, tc.Want)
		}
	}
}

func TestNetworkRules(t *testing.T) {
	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	ext := netip.MustParseAddr("192.0.2.7")
	for _, tc := range []struct {
		Name                          string
		Needs                         []NetNeed
		Served                        []Endpoint
		ABI                           int
		Connect, Bind, External, Reps int
		Rows                          string
	}{
		{"served port: loopback wildcard", []NetNeed{{policy.Connect, lo4, 8080, policy.TCP}}, []Endpoint{{8080, policy.TCP}}, 7, 1, 0, 0, 0, "allow 127.0.0.1:*"},
		{"both families served: localhost", []NetNeed{{policy.Connect, lo4, 8080, policy.TCP}, {policy.Connect, lo6, 8080, policy.TCP}}, []Endpoint{{8080, policy.TCP}}, 7, 1, 0, 0, 0, "allow localhost:*"},
		{"unserved port: exact", []NetNeed{{policy.Connect, lo4, 9, policy.TCP}}, nil, 7, 1, 0, 0, 0, "allow 127.0.0.1:9"},
		{"external never granted", []NetNeed{{policy.Connect, ext, 443, policy.TCP}}, nil, 7, 0, 0, 1, 0, ""},
		{"udp exact below ABI 10 reported", []NetNeed{{policy.Connect, lo4, 53, policy.UDP}}, nil, 7, 0, 0, 0, 1, ""},
		{"bind port 0 and 5000", []NetNeed{{policy.Bind, lo4, 0, policy.TCP}, {policy.Bind, lo4, 5000, policy.TCP}}, nil, 7, 0, 2, 0, 0, "allow 0 allow 5000"},
		{"bind udp port below ABI 10 reported", []NetNeed{{policy.Bind, lo4, 5000, policy.UDP}}, nil, 7, 0, 0, 0, 1, ""},
		{"bind on a non-loopback address reported", []NetNeed{{policy.Bind, ext, 80, policy.TCP}}, nil, 10, 0, 0, 0, 1, ""},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			r := NetworkRules(tc.Needs, tc.Served, tc.ABI)
			var rows []string
			for _, c := range r.Connect {
				rows = append(rows, c.String())
			}
			for _, b := range r.Bind {
				rows = append(rows, b.String())
			}
			if len(r.Connect) != tc.Connect || len(r.Bind) != tc.Bind || len(r.RefusedExternal) != tc.External ||
				len(r.Reports) != tc.Reps || strings.Join(rows, " ") != tc.Rows {
				t.Errorf("NetworkRules = %+v, rows %q; want %d connect, %d bind, %d external, %d reports, rows %q",
					r, strings.Join(rows, " "), tc.Connect, tc.Bind, tc.External, tc.Reps, tc.Rows)
			}
		})
	}
}
