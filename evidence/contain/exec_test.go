package contain

import (
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

func TestExecProbe(t *testing.T) {
	tests := []struct {
		Name    string
		Argv    []string
		Cap     time.Duration
		Status  int
		Out     string
		WantErr bool
	}{
		{"Exit", []string{"/bin/sh", "-c", "echo hi; exit 3"}, 10 * time.Second, 3, "hi\n", false},
		{"Killed", []string{"/bin/sh", "-c", "kill -9 $$"}, 10 * time.Second, 137, "", false},
		{"Missing", []string{"/nonexistent/probe"}, 10 * time.Second, 0, "", true},
		// Killed by its cap (SIGKILL, as the cpu and nproc limits kill):
		// no status, or a cpu limit that never stops the probe would
		// count as held.
		{"PastItsCap", []string{"/bin/sleep", "5"}, 200 * time.Millisecond, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			st, out, err := ExecProbe(t.Context(), tt.Argv, nil, tt.Cap)
			if (err != nil) != tt.WantErr || st != tt.Status || string(out) != tt.Out {
				t.Errorf("ExecProbe(%q) = %d, %q, %v; want %d, %q, error %v", tt.Argv, st, out, err, tt.Status, tt.Out, tt.WantErr)
			}
		})
	}
}

func TestWithProbe(t *testing.T) {
	p := &policy.Policy{FS: map[string]map[policy.Section]bool{"/work": {policy.Write: true}, "/bin/probe": {policy.Ioctl: true}}}
	q := WithProbe(p, "/bin/probe")
	if got := q.FS["/bin/probe"]; !got[policy.Read] || !got[policy.Execute] || !got[policy.Ioctl] || len(got) != 3 {
		t.Errorf("WithProbe: probe has %v, want read, execute and its own ioctl", got)
	}
	if !q.FS["/work"][policy.Write] || len(q.FS) != 2 {
		t.Errorf("WithProbe changed the other grants: %v", q.FS)
	}
	if got := p.FS["/bin/probe"]; len(got) != 1 {
		t.Errorf("WithProbe modified its argument: %v", got)
	}
}
