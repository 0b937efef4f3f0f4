package engine

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
)

const captureDir = "testdata/crosscheck-host"

// captureResolve is what attribute.ResolveSymlinks answered on the machine
// that made the capture (README.md there).
var captureResolve = map[string]string{
	"/usr/share/locale/locale.alias": "/etc/locale.alias",
	"/etc/localtime":                 "/usr/share/zoneinfo/Etc/UTC",
}

// captureReadlink reads no link: the capture's objects were named without
// any the attribution had not resolved already.
func captureReadlink(string) (string, error) { return "", os.ErrInvalid }

// captured reads the capture, with edit applied to the netlink lines first,
// and returns the refusals strace attributes inside the domain, the
// assembled records and the trace's pids.
func captured(t testing.TB, edit func([]string) []string) ([]*attribute.Refusal, *audit.Result) {
	t.Helper()
	opts := attribute.Options{
		Lstat: func(string) (os.FileInfo, error) { return nil, os.ErrNotExist },
		Resolve: func(p string) string {
			if r, ok := captureResolve[p]; ok {
				return r
			}
			return p
		},
	}
	return capturedIn(t, captureDir, opts, edit)
}

// capturedIn reads the capture in dir as captured does, attributing with
// opts.
func capturedIn(t testing.TB, dir string, opts attribute.Options, edit func([]string) []string) ([]*attribute.Refusal, *audit.Result) {
	t.Helper()
	tr, err := strace.ParseFileLenient(filepath.Join(dir, "trace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	for _, c := range tr.Calls {
		pids[c.PID], pids[c.TGID] = true, true
	}
	var refusals []*attribute.Refusal
	for _, r := range attribute.Refusals(tr.Calls, opts) {
		if r.Call.InDomain && (r.Layer == attribute.Filesystem || r.Layer == attribute.Network) {
			refusals = append(refusals, r)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "netlink.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if edit != nil {
		lines = edit(lines)
	}
	var recs []audit.Record
	for _, l := range lines {
		typ, body, _ := strings.Cut(l, " ")
		n, err := strconv.Atoi(typ)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		r, err := audit.ParseNetlink(uint16(n), []byte(body))
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return refusals, audit.Assemble(recs, func(pid int) bool { return pids[pid] })
}

// TestCrossCheckCapture: on the real capture every strace refusal has its
// record and every record its refusal.
func TestCrossCheckCapture(t *testing.T) {
	refusals, res := captured(t, nil)
	if res.Indeterminate() {
		t.Fatalf("capture is indeterminate: %v", res.Problems)
	}
	c := CrossCheck(refusals, res.Denials(), captureReadlink)
	if c.Compared != 18 || c.Records != 18 || len(c.Mismatches) != 0 || len(c.AuditOnly) != 0 || len(c.Matched) != 18 {
		t.Fatalf("CrossCheck = compared %d, records %d, mismatches %+v, audit-only %+v; want 18, 18, none, none",
			c.Compared, c.Records, c.Mismatches, c.AuditOnly)
	}
	for _, m := range c.Matched {
		if len(m.Records) != 1 || m.Records[0].Syscall == nil || m.Records[0].Syscall.Pid != m.Refusal.Call.TGID {
			t.Errorf("%s matched %d record(s), want one of its own process", m.Refusal, len(m.Records))
		}
	}
}

// editRecord replaces old with new in the first LANDLOCK_ACCESS line
// containing match.
func editRecord(match, old, new string) func([]string) []string {
	return func(lines []string) []string {
		out := slices.Clone(lines)
		for i, l := range out {
			if strings.HasPrefix(l, "1423 ") && strings.Contains(l, match) {
				out[i] = strings.Replace(l, old, new, 1)
				break
			}
		}
		return out
	}
}

// serialOf is the audit event serial of the first LANDLOCK_ACCESS line
// containing match.
func serialOf(lines []string, match string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, "1423 ") && strings.Contains(l, match) {
			_, rest, _ := strings.Cut(l, ":")
			s, _, _ := strings.Cut(rest, ")")
			return s
		}
	}
	return ""
}

// editSyscall replaces old with new in the SYSCALL line of the event whose
// LANDLOCK_ACCESS line (the first) contains match.
func editSyscall(match, old, new string) func([]string) []string {
	return func(lines []string) []string {
		s := serialOf(lines, match)
		out := slices.Clone(lines)
		for i, l := range out {
			if strings.HasPrefix(l, "1300 ") && strings.Contains(l, ":"+s+")") {
				out[i] = strings.Replace(l, old, new, 1)
			}
		}
		return out
	}
}

// TestCrossCheckDisagreements: each way a record can disagree with strace
// shows as a mismatch (and the record as audit-only); a lost record also
// breaks the deallocation count, so the run is indeterminate.
func TestCrossCheckDisagreements(t *testing.T) {
	cases := []struct {
		name          string
		edit          func([]string) []string
		mismatchObj   string
		auditOnly     int
		indeterminate bool
	}{
		{"record lost", func(lines []string) []string {
			var out []string
			dropped := false
			for _, l := range lines {
				if !dropped && strings.HasPrefix(l, "1423 ") && strings.Contains(l, `path="/dev/tty"`) {
					dropped = true
					continue
				}
				out = append(out, l)
			}
			return out
		}, "/dev/tty", 0, true},
		{"more rights than strace asked for", editRecord(`path="/etc/passwd"`, "blockers=fs.read_file", "blockers=fs.read_file,fs.execute"), "/etc/passwd", 1, false},
		{"another object", editRecord(`path="/etc/nsswitch.conf"`, `path="/etc/nsswitch.conf"`, `path="/etc/hosts"`), "/etc/nsswitch.conf", 1, false},
		{"another process", editSyscall(`path="/var/tmp/testing-dir/data/input.txt"`, " pid=", " pid=1"), "/var/tmp/testing-dir/data/input.txt", 1, false},
		{"another system call", editSyscall(`path="/etc/ld.so.cache"`, "syscall=257", "syscall=2"), "/etc/ld.so.cache", 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refusals, res := captured(t, tc.edit)
			if res.Indeterminate() != tc.indeterminate {
				t.Errorf("Indeterminate() = %v (%v), want %v", res.Indeterminate(), res.Problems, tc.indeterminate)
			}
			c := CrossCheck(refusals, res.Denials(), captureReadlink)
			if len(c.Mismatches) != 1 || !slices.Contains(c.Mismatches[0].Objects, tc.mismatchObj) {
				t.Errorf("mismatches = %+v, want one on %s", c.Mismatches, tc.mismatchObj)
			}
			if len(c.AuditOnly) != tc.auditOnly {
				t.Errorf("audit-only = %+v, want %d", c.AuditOnly, tc.auditOnly)
			}
		})
	}
}

// TestCrossCheckResolveUnix: a record that names fs.resolve_unix is
// granted by [read], as the enforcer grants it and the attribution charges
// it, so its audit-only entry says so.
func TestCrossCheckResolveUnix(t *testing.T) {
	refusals, res := captured(t, editRecord(`path="/etc/passwd"`, "blockers=fs.read_file", "blockers=fs.resolve_unix"))
	c := CrossCheck(refusals, res.Denials(), captureReadlink)
	if len(c.AuditOnly) != 1 || !slices.Equal(c.AuditOnly[0].Objects, []string{"/etc/passwd"}) || !slices.Equal(c.AuditOnly[0].Sections, []string{"read"}) {
		t.Errorf("audit-only = %+v, want /etc/passwd with sections [read]", c.AuditOnly)
	}
	if len(c.Mismatches) != 1 || !reflect.DeepEqual(c.Mismatches[0].AuditForObject, [][]string{{"read"}}) {
		t.Errorf("mismatches = %+v, want one whose record for the object names [read]", c.Mismatches)
	}
}

// BenchmarkCrossCheck joins the capture's refusals and records.
func BenchmarkCrossCheck(b *testing.B) {
	refusals, res := captured(b, nil)
	denials := res.Denials()
	b.ReportAllocs()
	for b.Loop() {
		CrossCheck(refusals, denials, captureReadlink)
	}
}

// TestJudgeTrace: a captured trace parses whole and passes; the same trace
// with one line cut short (a strace line the parser cannot read) aborts the
// run, naming the line, instead of leaving its refusal uncompared.
func TestJudgeTrace(t *testing.T) {
	src, err := os.ReadFile("../../testdata/strace/basic.strace")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.strace")
	damaged := filepath.Join(dir, "damaged.strace")
	lines := strings.SplitAfter(string(src), "\n")
	cut := strings.Join(lines[:2], "") + "1234 openat(AT_FDCWD, \"/etc/hos\n" + strings.Join(lines[2:], "")
	if err := os.WriteFile(whole, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := strace.ParseFileLenient(whole)
	if err != nil {
		t.Fatal(err)
	}
	if ae := JudgeTrace("cross-check", tr.Errors); ae != nil {
		t.Errorf("a captured trace was judged incomplete: %v", ae)
	}
	tr, err = strace.ParseFileLenient(damaged)
	if err != nil {
		t.Fatal(err)
	}
	ae := JudgeTrace("cross-check", tr.Errors)
	if ae == nil || !strings.Contains(ae.Reason, "1 line(s)") || !strings.Contains(ae.Reason, "strace line 3") {
		t.Errorf("JudgeTrace of a trace with a damaged line = %v; want an abort naming line 3", ae)
	}
}

// symlinksLinks is what readlink answered on the machine that made the
// symlink capture (testdata/symlinks-host), for every link its objects
// pass through.
var symlinksLinks = map[string]string{
	"/proc/mounts":                        "self/mounts",
	"/lib":                                "usr/lib",
	"/usr/share/locale/locale.alias":      "/etc/locale.alias",
	"/var/tmp/lockstep-symlinks/dangling": "/tmp/lockstep-symlinks-target",
	"/var/tmp/lockstep-symlinks/loop":     "loop",
}

func symlinksReadlink(p string) (string, error) {
	if t, ok := symlinksLinks[p]; ok {
		return t, nil
	}
	return "", os.ErrInvalid
}

// symlinksLstat answers as the capture machine did after the run: the
// links exist, the dangling link's target does not, everything else is a
// file.
func symlinksLstat(p string) (os.FileInfo, error) {
	if _, ok := symlinksLinks[p]; ok {
		return fakeInfo(fs.ModeSymlink), nil
	}
	if p == "/tmp/lockstep-symlinks-target" {
		return nil, os.ErrNotExist
	}
	return fakeInfo(0), nil
}

type fakeInfo fs.FileMode

func (m fakeInfo) Name() string       { return "" }
func (m fakeInfo) Size() int64        { return 0 }
func (m fakeInfo) Mode() fs.FileMode  { return fs.FileMode(m) }
func (m fakeInfo) ModTime() time.Time { return time.Time{} }
func (m fakeInfo) IsDir() bool        { return fs.FileMode(m).IsDir() }
func (m fakeInfo) Sys() any           { return nil }

// TestCrossCheckSymlinks: on the symlink capture every refusal has its
// record although strace and the kernel spell the objects differently
// (/proc/mounts and /proc/<pid>/mounts, /lib and /usr/lib, a dangling link
// and its target's directory): no mismatch, no audit-only record.
func TestCrossCheckSymlinks(t *testing.T) {
	opts := attribute.Options{Lstat: symlinksLstat, Readlink: symlinksReadlink, Resolve: func(p string) string {
		if strings.HasPrefix(p, "/proc/") {
			return p
		}
		return KernelPath(p, 0, 0, symlinksReadlink)
	}}
	refusals, res := capturedIn(t, "testdata/symlinks-host", opts, nil)
	if res.Indeterminate() {
		t.Fatalf("capture is indeterminate: %v", res.Problems)
	}
	c := CrossCheck(refusals, res.Denials(), symlinksReadlink)
	if len(c.Mismatches) != 0 || len(c.AuditOnly) != 0 || c.Compared != c.Records {
		t.Fatalf("CrossCheck = compared %d, records %d, mismatches %+v, audit-only %+v; want all matched",
			c.Compared, c.Records, c.Mismatches, c.AuditOnly)
	}
	want := map[string]string{"/proc/mounts": "/proc/20118/mounts", "/usr/lib/os-release": "/usr/lib/os-release",
		"/proc/20120/task/20120/stat": "/proc/20120/task/20120/stat", "/tmp": "/tmp"}
	for _, m := range c.Matched {
		if r, ok := want[m.Refusal.Paths[0]]; ok && m.Records[0].Access.Path == r {
			delete(want, m.Refusal.Paths[0])
		}
	}
	if len(want) != 0 {
		t.Errorf("not matched as the kernel named them: %v", want)
	}
}

// TestKernelPath: what each walk resolves, and what it leaves alone.
func TestKernelPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/proc/mounts", "/proc/7/mounts"},
		{"/proc/self/mountinfo", "/proc/7/mountinfo"},
		{"/proc/thread-self/stat", "/proc/7/task/9/stat"},
		{"/proc/self/fd/3", "/proc/7/fd/3"}, // magic: the process is gone
		{"/proc/42/cwd/x", "/proc/42/cwd/x"},
		{"/lib/os-release", "/usr/lib/os-release"},
		{"/lib/../etc/passwd", "/usr/etc/passwd"}, // .. after the link, as the kernel walks
		{"/var/tmp/lockstep-symlinks/dangling", "/tmp/lockstep-symlinks-target"},
		{"/var/tmp/lockstep-symlinks/loop", "/var/tmp/lockstep-symlinks/loop"}, // ELOOP
		{"/etc/passwd", "/etc/passwd"},
	} {
		if got := KernelPath(tc.in, 7, 9, symlinksReadlink); got != tc.want {
			t.Errorf("KernelPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzKernelPath: any path strace prints ends in a clean absolute path,
// through any table of links (loops included).
func FuzzKernelPath(f *testing.F) {
	f.Add("/proc/mounts", "/lib", "usr/lib")
	f.Add("/a/b/../c", "/a/b", "../b")
	f.Add("x/./y//z", "/x", "/x")
	f.Fuzz(func(t *testing.T, p, link, target string) {
		got := KernelPath(p, 1, 2, func(n string) (string, error) {
			if n == link {
				return target, nil
			}
			return "", os.ErrInvalid
		})
		if got != p && (!filepath.IsAbs(got) || filepath.Clean(got) != got) {
			t.Errorf("KernelPath(%q) = %q, neither as written nor a clean absolute path", p, got)
		}
	})
}

// TestCrossCheckDeviceIoctl: bash's isatty probe on a /dev/null it opened
// in the domain is refused with EACCES (fs.ioctl_dev); the pruner grants no
// device ioctl (attribute.Fixed), yet the kernel's record pairs with it
// instead of standing audit-only, and without a record it is no mismatch.
func TestCrossCheckDeviceIoctl(t *testing.T) {
	var calls []*strace.Call
	for c, err := range strace.NewParser(strings.NewReader(`7 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0) = 0
7 ioctl(2</dev/null>, TCGETS, 0x7fff7b5f2b50) = -1 EACCES (Permission denied)
`)).All() {
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	refusals := attribute.Refusals(calls, attribute.Options{})
	if len(refusals) != 1 || refusals[0].Layer != attribute.Fixed {
		t.Fatalf("refusals %v, want one fixed device ioctl", refusals)
	}
	refusals[0].Call.TGID = 7
	rec := audit.Denial{Access: audit.Access{Blockers: []string{"fs.ioctl_dev"}, Path: "/dev/null"},
		Syscall: &audit.Syscall{Arch: "c000003e", Nr: 16, Pid: 7}}
	c := CrossCheck(refusals, []audit.Denial{rec}, captureReadlink)
	if len(c.Matched) != 1 || len(c.AuditOnly) != 0 || len(c.Mismatches) != 0 {
		t.Errorf("with its record: matched %d, audit-only %+v, mismatches %+v; want one match", len(c.Matched), c.AuditOnly, c.Mismatches)
	}
	c = CrossCheck(refusals, nil, captureReadlink)
	if len(c.Mismatches) != 0 || c.Compared != 0 {
		t.Errorf("without a record: compared %d, mismatches %+v; want neither", c.Compared, c.Mismatches)
	}
}
