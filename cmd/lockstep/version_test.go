package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// TestVersionReleaseBuild builds lockstep as a release does (`make build`)
// and checks both forms of its version name this checkout's revision and
// whether it is modified, the pins and the fragment.
func TestVersionReleaseBuild(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (git rev-parse HEAD: %v): no revision to compare with", err)
	}
	rev := strings.TrimSpace(string(head))
	bin := filepath.Join(t.TempDir(), "lockstep")
	if out, err := exec.Command("make", "-C", "../..", "build", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	// Whether the tree is modified is read after the build, as make did.
	porcelain, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	modified := len(porcelain) > 0

	text, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("lockstep --version: %v", err)
	}
	wantRev := rev
	if modified {
		wantRev += " (modified)"
	}
	for _, want := range []string{"  revision  " + wantRev + "\n", "sha256:" + kernel.PinsSHA256(), "sha256:" + kernel.FragmentSHA256(), "go-landlock v"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("lockstep --version lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(string(text), rev[:12]) || strings.HasPrefix(string(text), "lockstep devel\n") {
		t.Errorf("lockstep --version's first line names no revision:\n%s", text)
	}

	raw, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("lockstep version --json: %v", err)
	}
	var v versionInfo
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("lockstep version --json: %v\n%s", err, raw)
	}
	if v.Revision != rev || v.Modified != modified || !strings.HasPrefix(string(text), "lockstep "+v.Version+"\n") {
		t.Errorf("--json = revision %q modified %v version %q; want %q, %v and the text's first line\n%s", v.Revision, v.Modified, v.Version, rev, modified, text)
	}
}

// TestVersionForms: --version and `version` print the same lines, --json
// the same facts, and every pin is listed with its fragment's digest.
func TestVersionForms(t *testing.T) {
	code, long, errOut := runCLI(t, "--version")
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("--version: status %d, stderr %q", code, errOut)
	}
	if _, verb, _ := runCLI(t, "version"); verb != long {
		t.Errorf("lockstep version printed\n%s\nbut --version\n%s", verb, long)
	}
	code, raw, _ := runCLI(t, "version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(raw), &v); code != cli.ExitOK || err != nil {
		t.Fatalf("version --json: status %d, %v\n%s", code, err, raw)
	}
	if len(v.Pins) != len(kernel.Pins()) || v.DefaultPin != kernel.DefaultPin || v.LandlockABI < 10 || v.GoLandlock == "" {
		t.Errorf("version --json = %+v; want every pin, the default pin, ABI 10 or more and go-landlock's version", v)
	}
	for _, p := range v.Pins {
		if !strings.Contains(long, p.Version) || !strings.Contains(long, p.FragmentSHA256) {
			t.Errorf("--version lacks pin %s or its fragment digest %s:\n%s", p.Version, p.FragmentSHA256, long)
		}
	}
	if code, _, _ := runCLI(t, "version", "extra"); code != cli.ExitUsage {
		t.Errorf("version extra: status %d, want %d", code, cli.ExitUsage)
	}
}
