package exercise

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
)

// TestRunUnderEnforcer runs the generic reference exercise behind
// `lockstep run` on this host's Landlock: a policy granting what it needs
// gives the unsandboxed verdict; one without write access to the working
// directory gives another; one that does not even let bash start is told
// apart by the missing sentinel.
func TestRunUnderEnforcer(t *testing.T) {
	featuretest.Require(t, featuretest.Landlock)
	bin := lockstepbin.Build(t)
	e := reference(t, "generic")
	dir := t.TempDir()
	work := filepath.Join(dir, "testing-dir")
	plain, err := e.Run(t.Context(), RunOptions{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "WORK", work)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	enough := write("enough.cfg", "[read]\n/usr\n/etc\n/proc\n/dev/null\nWORK\n[execute]\n/usr/bin\n/usr/lib\n"+
		"[write]\n/dev/null\nWORK\n[create]\nWORK\n[delete]\nWORK\n")
	readOnly := write("read-only.cfg", "[read]\n/usr\n/etc\n/proc\n/dev/null\nWORK\n[execute]\n/usr/bin\n/usr/lib\n[write]\n/dev/null\n")
	nothing := write("nothing.cfg", "[read]\n/usr/share/doc\n")
	broken := write("broken.cfg", "[reed]\n/usr\n")

	res, err := e.Run(t.Context(), RunOptions{WorkDir: work, Prefix: []string{bin, "run", "--config", enough, "--"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || !res.Verdict.Same(plain.Verdict) || !bytes.Contains(res.BeforeStart(), []byte("lockstep: OK abi=")) {
		t.Errorf("under a sufficient policy: started %v, verdict %+v, want started and %+v\n%s",
			res.Started, res.Verdict, plain.Verdict, res.Log)
	}

	res, err = e.Run(t.Context(), RunOptions{WorkDir: work, Prefix: []string{bin, "run", "--config", readOnly, "--"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || res.Verdict.Same(plain.Verdict) || res.Verdict.ReferenceProblem() == nil {
		t.Errorf("without write access: started %v, verdict %+v; want started and a different verdict\n%s",
			res.Started, res.Verdict, res.Log)
	}

	res, err = e.Run(t.Context(), RunOptions{WorkDir: work, Prefix: []string{bin, "run", "--config", nothing, "--"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Started || res.Status != 126 || !bytes.Contains(res.BeforeStart(), []byte("lockstep run: ")) {
		t.Errorf("under a policy that grants nothing: started %v, status %d, before start %q; want false, 126, the enforcer's words",
			res.Started, res.Status, res.BeforeStart())
	}
	if line := verdict.Stopped(res.Status, res.BeforeStart()); line != "" {
		t.Errorf("verdict.Stopped(a refused exec) = %q, want \"\" (a refusal to attribute, not a stop)", line)
	}

	// A policy the enforcer refuses: a stop, not a verdict.
	res, err = e.Run(t.Context(), RunOptions{WorkDir: work, Prefix: []string{bin, "run", "--config", broken, "--"}})
	if err != nil {
		t.Fatal(err)
	}
	if line := verdict.Stopped(res.Status, res.BeforeStart()); res.Started || res.Status != verdict.RefusedStatus ||
		!strings.Contains(line, "unknown section [reed]") {
		t.Errorf("under a broken policy: started %v, status %d, Stopped = %q; want false, 125, the enforcer's line",
			res.Started, res.Status, line)
	}
}
