package observer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
)

// TestRootDigestOnRolePath follows provenance.root_digest along observe's
// role path without booting a guest: the host takes the digest of the
// guest's root and puts it in the job's options (guestRun), the guest side
// reads them as the observe-guest role does (proto.ReadOptions), and the
// record it writes for an exercise carries that digest.
func TestRootDigestOnRolePath(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the digest's stat cache
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := rootdigest.Of(root)
	if err != nil {
		t.Fatal(err)
	}
	if empty, _ := rootdigest.Of(t.TempDir()); want == empty {
		t.Fatalf("the test root's digest %s is an empty root's: it would not tell roots apart", want)
	}
	pathSets := t.TempDir() // no .cfg: the exercise aborts before any run
	hopts, err := guestRun(HostOptions{Key: "fixture", Exercises: "../testdata/exercises", PathSets: pathSets,
		Kernel: "bzImage", WantABI: kvmrecord.ABI10, Sizing: harness.Sizing{Root: root}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(t.TempDir(), "options.json")
	if err := os.WriteFile(job, hopts.JobOptions, 0o644); err != nil {
		t.Fatal(err)
	}
	var opts GuestOptions
	if err := proto.ReadOptions(job, &opts); err != nil {
		t.Fatal(err)
	}
	if opts.RootDigest != want {
		t.Fatalf("the guest's options carry root_digest %q, want the host's digest of the root %q", opts.RootDigest, want)
	}
	// The guest side, on host paths for its shares.
	opts.Exercises, opts.PathSets, opts.Out = "../testdata/exercises", pathSets, t.TempDir()
	o, err := newObserver(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.cleanup()
	o.proven(t.Context(), kvmrecord.ABI10)
	sum := &Summary{Exercises: []ExerciseSummary{}}
	if status := o.exercises(t.Context(), sum); status != StatusFailed || len(sum.Exercises) != 1 {
		t.Fatalf("exercises = %d, %+v; want status 1 and the fixture's abort", status, sum.Exercises)
	}
	k, err := kvmrecord.Read(filepath.Join(opts.Out, "fixture_"+sum.Exercises[0].Exercise+".abi10.json"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Aborted == "" || k.Provenance.RootDigest != want {
		t.Errorf("record: aborted %q, provenance.root_digest %q; want an abort carrying %q", k.Aborted, k.Provenance.RootDigest, want)
	}
}
