//go:build linux

package recorder

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

func TestStartDiffNamesTheDifference(t *testing.T) {
	a := StartState{RootDigest: "sha256:a", Entries: []Entry{{Path: "/w", Dir: true}, {Path: "/w/x"}}}
	a.ListDigest = listDigest(a.Entries)
	if d := startDiff(a, a); d != "" {
		t.Errorf("startDiff of a state with itself = %q", d)
	}
	b := StartState{RootDigest: "sha256:b", Entries: []Entry{{Path: "/w", Dir: true}, {Path: "/w/y"}}}
	b.ListDigest = listDigest(b.Entries)
	d := startDiff(a, b)
	for _, want := range []string{"root's digest is sha256:b, recorded sha256:a", "present now, not when recorded: /w/y", "recorded, missing now: /w/x"} {
		if !strings.Contains(d, want) {
			t.Errorf("startDiff = %q, lacks %q", d, want)
		}
	}
}

// A refusal of an object a recorded call succeeded on fails the replay;
// one of an object never recorded does not; a script that did not finish
// does.
func TestJudgeReplay(t *testing.T) {
	o := &engine.Observation{ABI: 10, Audit: true, Refusals: []engine.Refusal{
		{Call: "bind", Objects: []string{"40123/udp"}, Rights: []string{"net.bind_udp"}, Audit: []string{"type=LANDLOCK_ACCESS blockers=net.bind_udp"}},
		{Call: "openat", Objects: []string{"/etc/never-recorded"}, Rights: []string{"fs.read_file"}},
	}}
	r := judgeReplay(o, nil, []string{"40123/udp"})
	if r.Status != StatusFail || len(r.Regressions) != 1 || len(r.Others) != 1 {
		t.Fatalf("judgeReplay = %+v", r)
	}
	if w := r.Why[0]; !strings.Contains(w, "bind 40123/udp (net.bind_udp); kernel record: type=LANDLOCK_ACCESS") {
		t.Errorf("why %q does not name the call, object, right and record", w)
	}
	clean := &engine.Observation{ABI: 10, Audit: true}
	if r := judgeReplay(clean, nil, nil); r.Status != StatusOK {
		t.Errorf("a clean replay = %+v", r)
	}
	if r := judgeReplay(clean, &ScriptError{Step: Step{Line: 4}, Err: ErrExpectTimeout}, nil); r.Status != StatusFail || !strings.Contains(r.Why[0], "script line 4") {
		t.Errorf("an unfinished replay = %+v", r)
	}
	old := &engine.Observation{ABI: 6, AuditReason: "Landlock ABI 6 writes no audit records"}
	if r := judgeReplay(old, nil, nil); len(r.Unchecked) != 2 {
		t.Errorf("unchecked on ABI 6 = %q, want the audit records and UDP rows", r.Unchecked)
	}
}

// The terminal's ioctls through the inherited standard descriptors are
// dropped; through the terminal opened again they stay.
func TestDropTerminalIoctls(t *testing.T) {
	const trace = `9 ioctl(0</dev/pts/0>, TCGETS, {c_iflag=ICRNL}) = 0
9 openat(AT_FDCWD</w>, "/dev/tty", O_RDWR) = 3</dev/pts/0>
9 ioctl(3</dev/pts/0>, TCGETS, {c_iflag=ICRNL}) = 0
`
	var calls []*strace.Call
	if _, err := strace.Parse(strings.NewReader(trace), func(c *strace.Call) error { calls = append(calls, c); return nil }); err != nil {
		t.Fatal(err)
	}
	uses := attribute.Uses(calls, attribute.Options{})
	kept, n := dropTerminalIoctls(uses, "/dev/pts/0")
	if n != 1 || len(kept) != 2 || kept[1].Call.Line != 3 {
		t.Errorf("dropped %d, kept %v; want the fd 0 ioctl dropped, the open and the fd 3 ioctl kept", n, kept)
	}
}
