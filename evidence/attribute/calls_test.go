package attribute

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// TestTraceCallsAttributeAlike checks, on every real capture the
// repository holds (the pruner's, the exercises' under lockstep run, the
// observer's cross-check on a host kernel), that a trace of TraceCalls
// alone attributes exactly as the whole trace does: the same refusals, in
// the same order, with the same threads, domains, objects, rights and
// reasons; and that every refusal the whole trace has beyond them is of a
// call no Landlock right governs (layer Other), which no policy grants and
// no limit signals. It drops the lines strace would no longer print with
// `-e trace=<TraceCalls>`, which is what an observed run under that set
// writes.
func TestTraceCallsAttributeAlike(t *testing.T) {
	files, err := filepath.Glob("../../testdata/strace/*.strace*")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../observer/engine/testdata/crosscheck-host/trace.txt")
	if len(files) < 8 {
		t.Fatalf("found %d captures, want the 8 of testdata/strace and the observer's", len(files))
	}
	keep := map[string]bool{}
	for _, c := range TraceCalls() {
		keep[c] = true
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			whole := readCapture(t, f)
			narrow, dropped := keepCalls(whole, keep)
			if dropped == 0 {
				t.Fatal("no line dropped: the capture does not exercise the narrowing")
			}
			all := attributeText(t, whole)
			got := attributeText(t, narrow)
			var want []*Refusal
			for _, r := range all {
				if keep[r.Call.Name] {
					want = append(want, r)
					continue
				}
				if r.Layer != Other {
					t.Errorf("a %s refusal of %s, which TraceCalls leaves out: %s", r.Layer, r.Call.Name, r)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d refusals from the narrowed trace, %d from the whole one", len(got), len(want))
			}
			for i := range got {
				if g, w := sameKey(got[i]), sameKey(want[i]); g != w {
					t.Errorf("refusal %d:\n narrowed %s\n whole    %s", i, g, w)
				}
			}
			t.Logf("%d of %d lines kept, %d refusals alike, %d of other calls left out", strings.Count(narrow, "\n"),
				strings.Count(whole, "\n"), len(got), len(all)-len(want))
		})
	}
}

// readCapture reads a capture, gunzipped when it is gzip.
func readCapture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := out.ReadFrom(zr); err != nil {
			t.Fatal(err)
		}
		b = out.Bytes()
	}
	return string(b)
}

// keepCalls drops the lines of system calls outside keep (both halves of
// a call printed in two), keeping signals, thread ends and strace's own
// lines, and returns the rest and how many lines it dropped.
func keepCalls(trace string, keep map[string]bool) (string, int) {
	var b strings.Builder
	dropped := 0
	sc := bufio.NewScanner(strings.NewReader(trace))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := callName(line); ok && !keep[name] {
			dropped++
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String(), dropped
}

// callName is the system call a line prints, or its resumption names.
func callName(line string) (string, bool) {
	rest := line
	if strings.HasPrefix(rest, "[pid ") {
		if i := strings.IndexByte(rest, ']'); i >= 0 {
			rest = rest[i+1:]
		}
	} else {
		rest = strings.TrimLeft(rest, "0123456789")
	}
	rest = strings.TrimLeft(rest, " ")
	if r, ok := strings.CutPrefix(rest, "<... "); ok {
		name, _, ok := strings.Cut(r, " resumed>")
		return name, ok
	}
	i := strings.IndexByte(rest, '(')
	if i <= 0 || strings.Trim(rest[:i], "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return "", false
	}
	return rest[:i], true
}

func attributeText(t *testing.T, trace string) []*Refusal {
	t.Helper()
	var calls []*strace.Call
	if _, err := strace.Parse(strings.NewReader(trace), func(c *strace.Call) error {
		calls = append(calls, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return Refusals(calls, Options{Resolve: ResolveSymlinks})
}

// sameKey is everything of a refusal but its line number, which the
// narrowing changes.
func sameKey(r *Refusal) string {
	return fmt.Sprintf("%s errno=%s limit=%s detail=%q reason=%q pid=%d tgid=%d depth=%d domain=%v call=%s",
		refusalKey(r), r.Errno, r.Limit, r.Detail, r.Reason, r.Call.PID, r.Call.TGID, r.Call.Depth, r.Call.InDomain, r.Call.Name)
}

func TestTraceCallsSorted(t *testing.T) {
	calls := TraceCalls()
	if !slices.IsSorted(calls) || len(slices.Compact(slices.Clone(calls))) != len(calls) {
		t.Errorf("TraceCalls() = %v, want sorted and distinct", calls)
	}
	for _, c := range []string{"openat", "execve", "ioctl", "bind", "connect", "sendto", "landlock_restrict_self", "clone3", "write", "mmap", "setsid"} {
		if !slices.Contains(calls, c) {
			t.Errorf("TraceCalls() lacks %s", c)
		}
	}
}
