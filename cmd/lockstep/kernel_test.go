package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/kernel"
)

// TestKernelVerb drives `lockstep kernel` against an empty temporary cache:
// nothing here builds a kernel (the kernel package's tests do).
func TestKernelVerb(t *testing.T) {
	cache := t.TempDir()
	for _, tc := range []struct {
		Name     string
		Args     []string
		Code     int
		Out, Err string
	}{
		{"NoSubcommand", []string{"kernel"}, cli.ExitUsage, "", "missing subcommand"},
		{"UnknownSubcommand", []string{"kernel", "bake"}, cli.ExitUsage, "", `unknown subcommand "bake"`},
		{"StrayArgument", []string{"kernel", "list", "extra"}, cli.ExitUsage, "", `unexpected argument "extra"`},
		{"UnknownPin", []string{"kernel", "build", "--pin", "6.1", "--cache", cache}, cli.ExitUsage, "", `unknown kernel pin "6.1" (pinned: 7.2.13, 7.2.9`},
		{"List", []string{"kernel", "list", "--cache", cache}, cli.ExitOK, "debian linux-source-7.2=7.2.13-1 (sid)", ""},
		{"VerifyNotBuilt", []string{"kernel", "verify", "--pin", "7.2.13", "--cache", cache}, cli.ExitFail, "", "kernel not built: 7.2.13 has no " + cache},
		{"Help", []string{"kernel", "--help"}, cli.ExitOK, "usage: lockstep kernel {build|verify|list|path|key|fragment|mirror|pin}", ""},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.Args...)
			if code != tc.Code || !strings.Contains(out, tc.Out) || !strings.Contains(errOut, tc.Err) {
				t.Errorf("lockstep %s = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q",
					strings.Join(tc.Args, " "), code, out, errOut, tc.Code, tc.Out, tc.Err)
			}
		})
	}
}

// TestKernelVerbStaleEntryListed: a cache directory no current key names is
// listed as stale beside the pins.
func TestKernelVerbStaleEntryListed(t *testing.T) {
	cache := t.TempDir()
	stale := filepath.Join(cache, strings.Repeat("ab", 32))
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "kernel", "list", "--cache", cache)
	if code != cli.ExitOK || !strings.Contains(out, "stale") || !strings.Contains(out, "not built") {
		t.Errorf("kernel list = %d\n%s%s\nwant a 'not built' pin and a stale entry", code, out, errOut)
	}
}

// TestKernelVerbRefusesTampered copies the real cached kernel (building it
// when the cache is empty) into a temporary cache, flips one byte, and
// expects `kernel verify` and `kernel path` to refuse it with exit 1, naming
// the check.
func TestKernelVerbRefusesTampered(t *testing.T) {
	bz, err := kernel.Path(t.Context(), kernel.DefaultPin, nil)
	if err != nil {
		t.Fatalf("kernel %s: %v", kernel.DefaultPin, err)
	}
	src := filepath.Dir(bz)
	cache := t.TempDir()
	dst := filepath.Join(cache, filepath.Base(src))
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{kernel.BzImageName, kernel.ConfigName, kernel.RecordName} {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if n == kernel.BzImageName {
			b[len(b)-1] ^= 0xff
		}
		if err := os.WriteFile(filepath.Join(dst, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"verify", "path", "build"} {
		code, out, errOut := runCLI(t, "kernel", sub, "--cache", cache)
		if code != cli.ExitFail || out != "" || !strings.Contains(errOut, "refused: bzImage sha256 is ") {
			t.Errorf("kernel %s on a flipped byte = %d\nstdout: %s\nstderr: %s\nwant 1 naming the bzImage sha256 check", sub, code, out, errOut)
		}
	}
}

// TestKernelVerbRewrittenEntry writes what a hostile cache writer can: under
// the key this machine computes for the default pin, a bzImage of its own
// and a build.txt and config that agree with it. When kernel/bzimages.txt
// records that key, verify, path and build refuse it; when it does not,
// verify accepts it and says it is unrecorded. Before the table, all three
// called it verified.
func TestKernelVerbRewrittenEntry(t *testing.T) {
	pin, err := kernel.Lookup(kernel.DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	key, err := (&kernel.Builder{}).Key(pin)
	if err != nil {
		t.Skipf("cannot compute the cache key here: %v", err)
	}
	cache := t.TempDir()
	dir := filepath.Join(cache, key)
	img := make([]byte, 0x400)
	binary.LittleEndian.PutUint16(img[0x1FE:], 0xAA55)
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x20E:], 0x100)
	copy(img[0x300:], pin.Version+" (lockstep@lockstep) #1 SMP\x00not the recorded kernel")
	cfg := []byte(strings.Join(kernel.RequiredOptions(kernel.Fragment()), "\n") + "\n")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	rec := &kernel.Record{Key: key, Pin: pin.Row, Version: pin.Version, ABI: pin.ABI, BzImageSHA256: sum(img), ConfigSHA256: sum(cfg)}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{kernel.BzImageName: img, kernel.ConfigName: cfg, kernel.RecordName: rec.Marshal()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var row *kernel.RecordedImage
	for _, r := range kernel.RecordedImages() {
		if r.Key == key {
			row = &r
		}
	}
	if row == nil {
		code, out, errOut := runCLI(t, "kernel", "verify", "--cache", cache)
		if code != cli.ExitOK || !strings.Contains(out, "unrecorded  bzImage sha256 "+sum(img)) || !strings.Contains(errOut, "is unrecorded") {
			t.Errorf("kernel verify of an unrecorded key = %d\nstdout: %s\nstderr: %s\nwant 0, reported unrecorded", code, out, errOut)
		}
		return
	}
	want := "refused: bzImage sha256 is " + sum(img) + ", " + row.Where() + " records " + row.BzImageSHA256
	for _, sub := range []string{"verify", "path", "build"} {
		code, out, errOut := runCLI(t, "kernel", sub, "--cache", cache)
		if code != cli.ExitFail || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, "is not used") {
			t.Errorf("kernel %s on a rewritten entry = %d\nstdout: %s\nstderr: %s\nwant 1 containing %q", sub, code, out, errOut, want)
		}
	}
}

func TestKernelVerbKey(t *testing.T) {
	pin, err := kernel.Lookup(kernel.DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&kernel.Builder{}).Key(pin)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errb := runCLI(t, "kernel", "key", "--pin", kernel.DefaultPin)
	if code != cli.ExitOK || strings.TrimSpace(out) != want || len(want) != 64 {
		t.Errorf("lockstep kernel key = %d, %q (stderr %q), want 0 and %q", code, out, errb, want)
	}
	if code, _, _ := runCLI(t, "kernel", "key", "--pin", "0.0.1"); code != cli.ExitUsage {
		t.Errorf("lockstep kernel key --pin 0.0.1 = %d, want %d (unknown pin)", code, cli.ExitUsage)
	}
}

func TestKernelVerbFragment(t *testing.T) {
	code, out, errb := runCLI(t, "kernel", "fragment", "--pin", "7.2.13")
	if code != cli.ExitOK || out != string(kernel.Fragment()) {
		t.Fatalf("kernel fragment --pin 7.2.13 = %d, %q; want fragment.config itself", code, errb)
	}
	code, out, _ = runCLI(t, "kernel", "fragment", "--pin", "7.3.4")
	if code != cli.ExitOK || !strings.Contains(out, "\nCONFIG_SYSCTL=y\n") || strings.Contains(out, "\nCONFIG_PROC_SYSCTL=y\n") {
		t.Errorf("kernel fragment --pin 7.3.4 = %d; want the 7.3 overlay applied (SYSCTL, not PROC_SYSCTL)", code)
	}
}

// TestKernelVerbPinsFile: --pins adds a file's rows, which kernel list shows
// with their file; a row redefining a shipped pin is a usage error naming it.
func TestKernelVerbPinsFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "extra.txt")
	row := "7.2.99 abi=10 source=url url=file:///nonexistent/linux-7.2.99.tar.xz sha256=" + strings.Repeat("0", 64) + "\n"
	if err := os.WriteFile(good, []byte(row), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "kernel", "list", "--pins", good, "--cache", dir)
	if code != cli.ExitOK || !strings.Contains(out, "FROM") || !regexpLine(out, `^7\.2\.99 +10 +file:///nonexistent/linux-7.2.99.tar.xz +`+good+` `) ||
		!regexpLine(out, `^7\.2\.13 +10 +debian .* shipped `) {
		t.Errorf("kernel list --pins = %d\n%s%s\nwant 7.2.99 from %s and 7.2.13 shipped", code, out, errOut, good)
	}
	bad := filepath.Join(dir, "bad.txt")
	pin, err := kernel.Lookup(kernel.DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(pin.Row, "abi=10", "abi=11", 1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "kernel", "list", "--pins", bad, "--cache", dir)
	if code != cli.ExitUsage || !strings.Contains(errOut, bad+":1: pin 7.2.13 redefines the shipped pin of kernel/pins.txt:") {
		t.Errorf("kernel list --pins bad = %d\n%s\nwant exit 2 naming the redefined pin", code, errOut)
	}
}

func regexpLine(out, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(out)
}

// TestKernelPinUsage: kernel pin wants exactly one package to pin.
func TestKernelPinUsage(t *testing.T) {
	for _, args := range [][]string{
		{"kernel", "pin"},
		{"kernel", "pin", "--debian-image", "linux-image-amd64", "--debian-source", "linux-source-6.1"},
		{"kernel", "pin", "--debian-image", "linux-image-amd64", "--abi", "-1"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, "--") {
			t.Errorf("lockstep %s = %d\n%s\nwant exit 2", strings.Join(args, " "), code, errOut)
		}
	}
}
