package attribute

import (
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// TestCaptureExercise attributes two real runs of the generic reference
// exercise under `lockstep run` (testdata/strace/README.md): one under a
// policy it passes with, one with its working directory read-only.
func TestCaptureExercise(t *testing.T) {
	const w = "/tmp/lockstep-capture/testing-dir"
	for _, tc := range []struct {
		Name string
		Want []string // refusal keys that must be present
		Deny []string // substrings no refusal key may contain
	}{{
		Name: "generic-pass.strace.gz",
		Want: []string{"filesystem write /dev/tty:read,write=read_file,write_file", "filesystem read /proc/filesystems:read=read_file"},
		Deny: []string{w},
	}, {
		Name: "generic-limits.strace.gz",
		Want: []string{"filesystem read /proc/filesystems:read=read_file"},
		Deny: []string{w},
	}, {
		Name: "c-broad.strace.gz",
		Deny: []string{w, " /tmp", " /usr"},
	}, {
		Name: "python-broad.strace.gz",
		Deny: []string{w, " /tmp", " /usr"},
	}, {
		Name: "generic-empty.strace",
		Want: []string{"filesystem execute /bin/bash:execute,read=execute,read_file"},
		Deny: []string{w, "/proc", "/dev"},
	}, {
		Name: "generic-readonly.strace",
		Want: []string{"filesystem create " + w + ":create=make_dir"},
	}} {
		t.Run(tc.Name, func(t *testing.T) {
			tr, err := strace.ParseFile("../../testdata/strace/" + tc.Name)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, r := range Refusals(tr.Calls, Options{}) {
				k := refusalKey(r)
				got[k] = true
				for _, d := range tc.Deny {
					if strings.Contains(k, d) {
						t.Errorf("refusal %q under a policy that grants %s", k, d)
					}
				}
				// grep's PCRE JIT reads its own /proc/<pid>/maps.
				if strings.HasPrefix(k, "filesystem read /proc/") && strings.HasSuffix(k, "/maps:read=read_file") &&
					!strings.HasPrefix(k, "filesystem read /proc/"+itoa(r.Call.TGID)+"/") {
					t.Errorf("%q does not name the refusing process %d", k, r.Call.TGID)
				}
			}
			for _, w := range tc.Want {
				if !got[w] {
					t.Errorf("missing refusal %q; have %v", w, got)
				}
			}
		})
	}
}
