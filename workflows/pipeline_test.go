package workflows

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// stageFixture lays out what the merge job downloads, from the orchestrator's
// committed fixture (testdata/orchestrate/fixture, whose records vouch for the
// raw bytes beside them): the java exercises renamed to key fixture, the
// default prune's .cfg/.json in default-prune/, and every file of both
// exercises in kvm-small/ and kvm-large/ as two observer runs would leave them.
func stageFixture(t *testing.T, root, out string) {
	t.Helper()
	src := filepath.Join(root, "testdata", "orchestrate", "fixture")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"default-prune", "kvm-small", "kvm-large"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "java_") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := "fixture_" + strings.TrimPrefix(e.Name(), "java_")
		if strings.HasSuffix(name, ".json") {
			// Only the records name the key; the hashed .cfg bytes stay as they are.
			b = bytes.Replace(b, []byte(`"key": "java"`), []byte(`"key": "fixture"`), 1)
		}
		dirs := []string{"kvm-small", "kvm-large"}
		if !strings.Contains(name, ".abi10.") {
			dirs = append(dirs, "default-prune")
		}
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(out, d, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	if n < 7 {
		t.Fatalf("staged %d files from %s, want the 7 files of java_one and java_two", n, src)
	}
}

// treeHash hashes every file's path and bytes under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(p + "\x00"))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestPipelineMergeStages runs the merge, check and summary stages of
// scripts/prune-kvm.sh with the real lockstep orchestrate on a staged
// fixture: the rows land in Abi10-fixture.cfg and never in the base, a
// tampered sidecar is refused (the check stage proves it), and two observers
// that disagree make the merge fail red and leave the previous tree as it was.
func TestPipelineMergeStages(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "cmd", "lockstep", "orchestrate.go")); err != nil {
		t.Fatalf("the orchestrate verb is missing: %v", err)
	}
	bin := filepath.Dir(lockstepbin.Build(t))
	out := t.TempDir()
	stageFixture(t, root, out)
	script := filepath.Join(root, "scripts", "prune-kvm.sh")
	run := func(stage string, args ...string) (int, string) {
		cmd := exec.CommandContext(t.Context(), script, append([]string{stage, "--key", "fixture", "--out", out}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GITHUB_STEP_SUMMARY="+filepath.Join(out, "step-summary.md"))
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(b)
		} else if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		return 0, string(b)
	}
	for _, stage := range []string{"merge", "check", "summary"} {
		if code, o := run(stage, "--kvm", "small", "--kvm", "large"); code != 0 {
			t.Fatalf("stage %s exited %d:\n%s", stage, code, o)
		}
	}
	base := filepath.Join(out, "merged-base")
	abi10, err := os.ReadFile(filepath.Join(base, "Abi10-fixture.cfg"))
	if err != nil || !strings.Contains(string(abi10), "\nallow 5000 udp\n") {
		t.Errorf("Abi10-fixture.cfg = %q, %v; want the row allow 5000 udp", abi10, err)
	}
	if b, err := os.ReadFile(filepath.Join(base, "BaseLanguage-fixture.cfg")); err != nil || bytes.Contains(b, []byte("udp")) {
		t.Errorf("BaseLanguage-fixture.cfg: %v, holds udp: %v", err, bytes.Contains(b, []byte("udp")))
	}
	if b, err := os.ReadFile(filepath.Join(out, "step-summary.md")); err != nil || !bytes.Contains(b, []byte("allow 5000 udp")) || !bytes.Contains(b, []byte("| passed |")) {
		t.Errorf("step summary = %q, %v; want the row and passed stages", b, err)
	} else if !bytes.Contains(b, []byte("- `TailPhobos.cfg`: 1 line\n")) {
		t.Errorf("step summary = %q; want \"TailPhobos.cfg: 1 line\", in the singular", b)
	}

	// The two observers disagree: the merge fails and writes nothing.
	before := treeHash(t, base)
	side := filepath.Join(out, "kvm-large", "fixture_two.abi10.cfg")
	if err := os.WriteFile(side, []byte("# another header\n[bind]\nallow 6000 udp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, o := run("merge", "--kvm", "small", "--kvm", "large")
	if code != 1 || !strings.Contains(o, "disagree") {
		t.Errorf("merge of disagreeing observers exited %d, want 1 naming the disagreement:\n%s", code, o)
	}
	if after := treeHash(t, base); after != before {
		t.Error("a refused merge changed merged-base")
	}
	// And the check stage itself fails when the merged rows are not the fixture's.
	if err := os.WriteFile(filepath.Join(base, "Abi10-fixture.cfg"), []byte("[bind]\nallow 6000 udp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, o := run("check", "--kvm", "small", "--kvm", "large"); code == 0 {
		t.Errorf("check passed with Abi10-fixture.cfg lacking allow 5000 udp:\n%s", o)
	}
}

// TestPipelineUsage checks the script refuses bad command lines with exit 2.
func TestPipelineUsage(t *testing.T) {
	root := repoRoot(t)
	script := filepath.Join(root, "scripts", "prune-kvm.sh")
	for _, args := range [][]string{
		{},
		{"--key", "Bad Key"},
		{"--key", "generic"}, // source fixture needs key fixture
		{"--key", "generic", "--source", "other"},
		{"observe", "--key", "fixture", "--out", t.TempDir()}, // no --name/--mem/--cpus
		{"--key", "fixture", "--bogus"},
	} {
		cmd := exec.CommandContext(t.Context(), script, args...)
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("prune-kvm.sh %q: %v, want exit 2", args, err)
		}
	}
}

// TestImageBootsGenericExercise is the images acceptance end to end: build
// (or find, checked) the generic image, boot the pinned kernel with --root of
// it, and run the generic reference exercise in the guest from a read-only
// share, as the exercise contract runs it (a fresh copy in
// /var/tmp/testing-dir).
func TestImageBootsGenericExercise(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the image and booting under TCG take minutes")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("building the image needs root (debootstrap, chroot)")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (apt-get install debootstrap)")
	}
	root := repoRoot(t)
	bin := lockstepbin.Build(t)
	lockstep := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("lockstep %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
	lockstep("image", "build", "generic")
	img := strings.TrimSpace(lockstep("image", "path", "generic"))
	ex := filepath.Join(root, "testdata", "exercises", "generic", "shell-reference")
	out := lockstep("boot", "--root", img, "--share", ex+":/srv/ex", "--",
		"bash", "-c", "cat /etc/debian_version && rm -rf /var/tmp/testing-dir && cp -R /srv/ex /var/tmp/testing-dir && cd /var/tmp/testing-dir && bash ./build_script.sh")
	if !strings.HasPrefix(out, "12.") || !strings.Contains(out, " 0 failed") {
		t.Errorf("the generic exercise in a guest on the generic image printed:\n%s\nwant Debian 12 and every test passed", out)
	}
}

// TestPipelineRootWithoutEngine: where neither docker nor podman is on PATH,
// the root every guest of `make prune-kvm` boots is the lockstep image
// generic (made from the prune image's package list), never this machine's
// /: the root stage prints that image's path and says why.
func TestPipelineRootWithoutEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the generic image takes minutes when it is not cached")
	}
	if os.Geteuid() != 0 {
		t.Skip("building the image needs root (debootstrap, chroot)")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap is not installed (apt-get install debootstrap)")
	}
	root := repoRoot(t)
	bin := lockstepbin.Build(t)
	path := pathWithout(t, "docker", "podman")
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "scripts", "prune-kvm.sh"), "root", "--key", "fixture", "--out", t.TempDir())
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("prune-kvm.sh root without docker and podman: %v\n%s", err, stderr.Bytes())
	}
	want, err := exec.CommandContext(t.Context(), bin, "image", "path", "generic").Output()
	if err != nil {
		t.Fatalf("lockstep image path generic: %v", err)
	}
	if string(out) != string(want) {
		t.Errorf("root stage printed %q, want the generic image %q", out, want)
	}
	if !strings.Contains(stderr.String(), "no docker or podman answers") {
		t.Errorf("the root stage did not say why it chose the image:\n%s", stderr.Bytes())
	}
}

// pathWithout returns a PATH of one directory linking every program of
// this PATH except the named ones.
func pathWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if slices.Contains(names, e.Name()) {
				continue
			}
			link := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // an earlier PATH entry wins, as in a lookup
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// Where a container engine answers but no image registry does, the root
// stage makes the prune image's base offline (scripts/prune-base.sh), says
// so in one warning line, and builds and exports the prune image from it;
// it failed at once, with the engine's status 125, on the pull of the
// pinned base.
func TestPipelineRootOfflineBase(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the offline base and the prune image take minutes when not cached")
	}
	if os.Geteuid() != 0 {
		t.Skip("the offline base needs root (debootstrap)")
	}
	engine := ""
	for _, e := range []string{"docker", "podman"} {
		if exec.CommandContext(t.Context(), e, "info").Run() == nil {
			engine = e
			break
		}
	}
	if engine == "" {
		t.Skip("no docker or podman answers")
	}
	root := repoRoot(t)
	dockerfile, err := os.ReadFile(filepath.Join(root, "images", "prune", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var base string
	for _, l := range strings.Split(string(dockerfile), "\n") {
		if b, ok := strings.CutPrefix(l, "ARG BASE="); ok {
			base = b
		}
	}
	if exec.CommandContext(t.Context(), engine, "image", "inspect", base).Run() == nil {
		t.Skipf("%s has the pinned base %s: this test needs a machine without it and without a registry", engine, base)
	}
	bin := lockstepbin.Build(t)
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "scripts", "prune-kvm.sh"), "root", "--key", "fixture", "--out", out)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "LOCKSTEP_PRUNE_BASE=", "LOCKSTEP_CONTAINER_ENGINE="+engine)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	printed, err := cmd.Output()
	if err == nil && !strings.Contains(stderr.String(), "no image registry answers") {
		t.Skipf("a registry gave %s: this test needs a machine where none answers", base)
	}
	if err != nil {
		t.Fatalf("prune-kvm.sh root with no image registry: %v\n%s", err, stderr.Bytes())
	}
	if n := strings.Count(stderr.String(), "warning"); n != 1 {
		t.Errorf("%d warning lines; want one:\n%s", n, stderr.Bytes())
	}
	ref, err := os.ReadFile(filepath.Join(out, "prune-base.ref"))
	if want := strings.SplitN(base, "@", 2)[0] + "\n"; err != nil || string(ref) != want {
		t.Errorf("prune-base.ref = %q, %v; want %q, the pinned reference without its digest", ref, err, want)
	}
	guestRoot := strings.TrimSpace(string(printed))
	if guestRoot != filepath.Join(out, "prune-root", "root") {
		t.Fatalf("root stage printed %q; want the prune image's unpacked root under %s", printed, out)
	}
	if _, err := os.Stat(filepath.Join(guestRoot, "usr", "lib", "python3.11")); err != nil {
		t.Errorf("the prune root lacks the prune image's Python: %v", err)
	}
}
