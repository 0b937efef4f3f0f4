package observer

import (
	"github.com/lockstep-sandbox/lockstep/harness"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
)

func TestGrantRowsRender(t *testing.T) {
	p, err := policy.Parse("t.cfg", []byte("# c\n[read]\n/etc\n[bind]\nallow 5000 udp\nallow 80\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(engine.GrantRows(p), ";")
	want := "[read] /etc;[bind] allow 80;[bind] allow 5000 udp"
	if got != want {
		t.Errorf("GrantRows = %q, want %q", got, want)
	}
}

// TestKeepArtefacts: the raw audit log comes from the guest's results, the
// kernel's configuration from beside the bzImage, and run.json names every
// artefact present, the console included; a missing one is left out.
func TestKeepArtefacts(t *testing.T) {
	results, kdir, ps := t.TempDir(), t.TempDir(), t.TempDir()
	for path, body := range map[string]string{
		filepath.Join(results, AuditRawFile): "1423 audit(1.2:3): domain=1 blockers=fs.read_file\n",
		filepath.Join(kdir, "config"):        "CONFIG_SECURITY_LANDLOCK=y\n",
		filepath.Join(ps, ConsoleFile):       "LOCKSTEP-STATUS 0\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := HostOptions{PathSets: ps, Kernel: filepath.Join(kdir, "bzImage")}
	names, err := keepArtefacts(opts, results)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{ConsoleFile, AuditRawFile, KernelConfigFile}; !slices.Equal(names, want) {
		t.Errorf("artefacts %v, want %v", names, want)
	}
	if b, _ := os.ReadFile(filepath.Join(ps, KernelConfigFile)); string(b) != "CONFIG_SECURITY_LANDLOCK=y\n" {
		t.Errorf("%s = %q", KernelConfigFile, b)
	}
	os.Remove(filepath.Join(ps, AuditRawFile))
	names, err = keepArtefacts(opts, t.TempDir())
	if err != nil || slices.Contains(names, AuditRawFile) {
		t.Errorf("without results: %v, %v; want no %s", names, err, AuditRawFile)
	}
	// A passed deadline's forensics, which the harness writes into the
	// path sets (guestRun's ForensicsDir), are named and then cleared.
	if err := os.WriteFile(filepath.Join(ps, ForensicsFile), []byte("RIP=…"), 0o644); err != nil {
		t.Fatal(err)
	}
	if names, err = keepArtefacts(opts, results); err != nil || !slices.Contains(names, ForensicsFile) {
		t.Errorf("with forensics: %v, %v; want %s", names, err, ForensicsFile)
	}
	if err := clearArtefacts(ps); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ps, ForensicsFile)); !os.IsNotExist(err) {
		t.Errorf("%s after clearArtefacts: %v, want gone", ForensicsFile, err)
	}
}

// TestGuestRunKeepsForensics: an observation's guest leaves a passed
// deadline's forensics in the path sets, not in the results directory
// Host removes.
func TestGuestRunKeepsForensics(t *testing.T) {
	ps := t.TempDir()
	hopts, err := guestRun(HostOptions{PathSets: ps, Exercises: t.TempDir(), Sizing: harness.Sizing{Root: t.TempDir()}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if hopts.ForensicsDir != ps {
		t.Errorf("ForensicsDir %q, want the path sets %q", hopts.ForensicsDir, ps)
	}
}
