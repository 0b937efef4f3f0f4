package strace

import (
	"bytes"
	"strings"
	"testing"
)

// TestCaptureBasic checks the parser against a real capture (see
// testdata/strace/README.md for the command that made it): a Go program
// restricts all its threads with go-landlock, then executes bash.
func TestCaptureBasic(t *testing.T) {
	for _, name := range []string{"basic.strace", "basic-superseded.strace"} {
		t.Run(name, func(t *testing.T) {
			calls, st := parseAll(t, string(readCapture(t, name)))
			if st.Errors != 0 || st.Orphans != 0 || st.Unplaced != 0 || st.Reused != 0 {
				t.Errorf("stats = %+v, want no errors, orphans, unplaced or reused pids", st)
			}
			root := calls[0].PID
			var restricts, joined int
			threads := map[int]bool{}
			refused := map[string]bool{}
			for _, c := range calls {
				if c.Joined {
					joined++
				}
				if c.Name == "landlock_restrict_self" && c.Ret == "0" {
					restricts++
					threads[c.PID] = true
					if c.TGID != root {
						t.Errorf("restricting thread %d in group %d, want %d", c.PID, c.TGID, root)
					}
				}
				if c.Failed() && (c.Errno == "EACCES" || c.Errno == "EXDEV") {
					key := c.Name
					if len(c.Args) > 1 {
						if s, ok := c.Args[1].Str(); ok {
							key += " " + s
						} else if s, ok := c.Args[0].Str(); ok {
							key += " " + s
						}
					}
					if c.InDomain {
						refused[key] = true
					} else if key != "execve" && !strings.Contains(key, "noexec") {
						t.Errorf("line %d: %s outside the domain", c.Line, c)
					}
				}
			}
			// go-landlock on ABI 7 restricts every OS thread (libpsx).
			if restricts < 2 || restricts != len(threads) {
				t.Errorf("%d successful landlock_restrict_self by %d threads, want one per thread, at least 2", restricts, len(threads))
			}
			if joined < 10 {
				t.Errorf("%d joined calls, want many", joined)
			}
			for _, want := range []string{
				"openat /tmp/llcap/secret/s.txt",
				"openat /tmp/llcap/secret",
				"openat /tmp/llcap/ro/new.txt",
				"mkdir /tmp/llcap/ro/d",
				"unlinkat /tmp/llcap/ro/a.txt",
				"renameat2 /tmp/llcap/norefer/x.txt",
				"rename /tmp/llcap/rw/y.txt",
				"execve /tmp/llcap/rd/tool.sh",
				"openat /proc/self/status",
				"bind", "connect", "ioctl",
			} {
				if !refused[want] {
					t.Errorf("no refusal %q inside the domain; have %v", want, refused)
				}
			}
			// The -pre command ran before restricting: its refused execve
			// is outside the domain, its cat of the secret succeeded.
			for _, c := range calls {
				if c.Name == "execve" && c.Failed() {
					if s, _ := c.Args[0].Str(); s == "/tmp/llcap/ro/noexec.txt" {
						if c.InDomain {
							t.Errorf("line %d: the -pre execve is in the domain", c.Line)
						}
						break
					}
				}
			}
			// Every call of bash and of what it started is in the domain.
			var bash int
			for _, c := range calls {
				if c.Name == "execve" && !c.Failed() && len(c.Args) > 0 && c.Args[0] == `"/bin/bash"` {
					bash = c.Line
					if !c.InDomain {
						t.Errorf("line %d: execve of bash outside the domain", c.Line)
					}
				}
				if bash > 0 && c.Line > bash && c.Kind == Syscall && !c.InDomain {
					t.Errorf("line %d: %s outside the domain after bash started", c.Line, c)
					break
				}
			}
			if bash == 0 {
				t.Error("no execve of /bin/bash")
			}
		})
	}
}

// TestCaptureSuperseded: in this capture a non-leader Go thread executed
// bash (`<pid changed to N ...>`, `+++ superseded by execve in pid M +++`);
// the execve must come out joined under the leader's pid.
func TestCaptureSuperseded(t *testing.T) {
	data := readCapture(t, "basic-superseded.strace")
	if !bytes.Contains(data, []byte("superseded by execve")) {
		t.Fatal("capture lacks the superseded line it was chosen for")
	}
	calls, _ := parseAll(t, string(data))
	for i, c := range calls {
		if c.Kind != Superseded {
			continue
		}
		for _, d := range calls[i+1:] {
			if d.PID == c.PID && d.Name == "execve" {
				if !d.Joined || d.Ret != "0" || !d.InDomain || d.Args[0] != `"/bin/bash"` {
					t.Errorf("execve after superseding = %+v", d)
				}
				return
			}
		}
	}
	t.Error("no superseded event followed by its execve")
}

func TestCaptureBench(t *testing.T) {
	calls, st := parseAll(t, string(readCapture(t, "bench.strace.gz")))
	if st.Errors != 0 || st.Orphans != 0 || st.Unplaced != 0 {
		t.Errorf("stats = %+v", st)
	}
	if len(calls) < 10000 {
		t.Errorf("%d calls, want a large capture", len(calls))
	}
}

// TestCaptureExercise: runs of the generic reference exercise under
// `lockstep run`. The enforcer restricts one thread and starts the command
// from it; every call of the command must be in the domain, none of the
// enforcer's before it.
func TestCaptureExercise(t *testing.T) {
	for _, name := range []string{"generic-pass.strace.gz", "generic-readonly.strace", "generic-limits.strace.gz", "c-broad.strace.gz", "python-broad.strace.gz", "generic-empty.strace"} {
		t.Run(name, func(t *testing.T) {
			calls, st := parseAll(t, string(readCapture(t, name)))
			if st.Errors != 0 || st.Orphans != 0 || st.Unplaced != 0 || st.Reused != 0 {
				t.Errorf("stats = %+v", st)
			}
			restricted := 0
			for _, c := range calls {
				if c.Name == "landlock_restrict_self" && c.Ret == "0" {
					restricted = c.Line
					break
				}
				if c.InDomain {
					t.Fatalf("line %d: %s in the domain before any restriction", c.Line, c)
				}
			}
			if restricted == 0 {
				t.Fatal("no landlock_restrict_self")
			}
			var bashes int
			for _, c := range calls {
				if c.Name == "execve" && !c.Failed() && c.Line > restricted {
					bashes++
					if !c.InDomain {
						t.Errorf("line %d: %s outside the domain", c.Line, c)
					}
				}
			}
			if bashes < 2 && name != "generic-empty.strace" {
				t.Errorf("%d execve after the restriction, want the command's", bashes)
			}
		})
	}
}
