package enforcer

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLimitAndExecAllocatesNothing: from the first rlimit to the report of
// a failed execve the child must not allocate, because with mem_mb set
// (RLIMIT_AS below the Go process's own ~1.2 GiB of address space) a heap
// growth is a fatal "out of memory", exit 2, instead of the command.
func TestLimitAndExecAllocatesNothing(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var core unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &core); err != nil {
		t.Fatal(err)
	}
	// RLIMIT_CORE at its own soft value changes nothing that matters here
	// (its hard limit drops to the soft one; core dumps stay as they were).
	rl := []rlimitV{{Name: "core", Resource: unix.RLIMIT_CORE, Value: core.Cur}}
	ex, err := prepareExec("/opt/x/tool", []string{"tool", "-v"}, []string{"PATH=/usr/bin"}, rl)
	if err == nil {
		err = ex.encodeReports()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		errno  unix.Errno
		status int
		msg    string
	}{
		{unix.EACCES, StatusCannotExec, "granted in [execute]"},
		{unix.ENOENT, StatusNotFound, "/opt/x/tool: no such file"},
		{unix.ENOEXEC, StatusCannotExec, "exec format error"},
	} {
		execve := func(argv0 *byte, argv, envv []*byte) unix.Errno { return tc.errno }
		var status int
		var report []byte
		allocs := testing.AllocsPerRun(50, func() { status, report = ex.limitAndExec(execve) })
		if allocs != 0 {
			t.Errorf("%v: limitAndExec allocated %.0f times per run, want 0", tc.errno, allocs)
		}
		var r childReport
		if err := json.Unmarshal(report, &r); err != nil {
			t.Fatalf("%v: report %q: %v", tc.errno, report, err)
		}
		if status != tc.status || r.Status != tc.status || !strings.Contains(r.Msg, tc.msg) {
			t.Errorf("%v: status %d, report %+v; want %d naming %q", tc.errno, status, r, tc.status, tc.msg)
		}
	}
}

// TestLimitAndExecAddressSpaceLast: a limit that cannot be set stops before
// RLIMIT_AS is set, so the refusal can still be formatted, and names the limit.
func TestLimitAndExecAddressSpaceLast(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &before); err != nil {
		t.Fatal(err)
	}
	rl := []rlimitV{{Name: "mem_mb", Resource: unix.RLIMIT_AS, Value: 1 << 20}, {Name: "bogus", Resource: 4242, Value: 1}}
	ex, err := prepareExec("/bin/true", []string{"true"}, nil, rl)
	if err != nil {
		t.Fatal(err)
	}
	called := false
	status, report := ex.limitAndExec(func(*byte, []*byte, []*byte) unix.Errno { called = true; return 0 })
	var after unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("RLIMIT_AS changed to %+v (was %+v): it must be set last", after, before)
	}
	if called || status != StatusRefused || report != nil || !strings.Contains(ex.message(), "set bogus limit to 1") {
		t.Errorf("status %d, report %q, exec called %v, message %q; want 125 naming the bogus limit, no exec", status, report, called, ex.message())
	}
}
