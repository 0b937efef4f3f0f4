package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// TestRunStages: the engine hands its runner strace's wrapping of
// the enforcer's one command line, and says at which stage a run stopped
// while reading as the cause (callers word their own reasons from it).
func TestRunStages(t *testing.T) {
	p, err := policy.Parse("p.cfg", []byte("[read]\n/usr\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var got []string
	cause := errors.New("no such runner")
	ob, err := Run(t.Context(), Spec{Policy: p, Exe: "/x/lockstep", Scratch: dir, Stem: "s", Kind: "observed",
		Run: func(_ context.Context, prefix []string) (int, string, error) {
			got = prefix
			return 0, "partial", cause
		}})
	var se *StageError
	if !errors.As(err, &se) || se.Stage != StageRun || err.Error() != cause.Error() || !errors.Is(err, cause) || ob == nil || ob.Output != "partial" {
		t.Fatalf("Run = %+v, %v; want a run-stage error that reads as its cause, with the output so far", ob, err)
	}
	cfg := filepath.Join(dir, "s.cfg")
	want := append([]string{"-o", filepath.Join(dir, "s.trace"), "/x/lockstep", "run", "-q"}, enforcer.MeasureArgs()...)
	want = append(want, "--config", cfg, "--")
	if got[0] != "strace" || !slices.Equal(got[len(got)-len(want):], want) {
		t.Errorf("prefix = %q, want strace … %q", got, want)
	}
	if b, err := os.ReadFile(cfg); err != nil || string(b) != string(p.Render()) {
		t.Errorf("%s = %q, %v; want the rendered policy", cfg, b, err)
	}

	// A runner that "succeeds" without strace leaves no trace to read.
	ob, err = Run(t.Context(), Spec{Policy: p, Exe: "/x/lockstep", Scratch: dir, Stem: "t", Kind: "observed",
		Run: func(context.Context, []string) (int, string, error) { return 7, "", nil }})
	if !errors.As(err, &se) || se.Stage != StageTrace || !strings.HasPrefix(err.Error(), "the observed run's trace: ") || ob == nil || ob.Status != 7 {
		t.Errorf("Run without a trace = %+v, %v; want a trace-stage error naming the run, with the status", ob, err)
	}
}
