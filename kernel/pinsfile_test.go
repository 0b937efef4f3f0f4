package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resetAdded forgets every added pin file, LOCKSTEP_PINS's included, for the
// test and again after it.
func resetAdded(t *testing.T) {
	t.Helper()
	clear := func() {
		added.mu.Lock()
		added.envDone, added.envErr, added.files, added.pins = false, nil, nil, nil
		added.mu.Unlock()
	}
	clear()
	t.Cleanup(clear)
}

func writePins(t *testing.T, src string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "pins.txt")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const imageRow = "6.1.0-57-amd64 abi=2 source=debian-image package=linux-image-6.1.0-57-amd64 version=6.1.176-1 suite=bookworm " +
	"sha256=1111111111111111111111111111111111111111111111111111111111111111 inner=boot/vmlinuz-6.1.0-57-amd64 " +
	"inner-sha256=2222222222222222222222222222222222222222222222222222222222222222"

func TestPinsFromEnv(t *testing.T) {
	resetAdded(t)
	shipped, err := lookupIn(Pins(), DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	// A shipped row repeated word for word is the shipped pin, not a second one.
	f := writePins(t, "# extra\n"+imageRow+"\n"+shipped.Row+"\n")
	t.Setenv(PinsEnv, f)
	all, err := AllPins()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(Pins())+1 {
		t.Fatalf("AllPins = %d pins, want the %d shipped and one added", len(all), len(Pins()))
	}
	p, err := Lookup("6.1.0-57-amd64")
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != SourceDebianImage || p.Origin() != f || p.Line != 2 || p.ABI != 2 || p.Inner != "boot/vmlinuz-6.1.0-57-amd64" {
		t.Errorf("Lookup(6.1.0-57-amd64) = %+v (origin %s)", p, p.Origin())
	}
	if d, _ := Lookup(DefaultPin); d.Origin() != ShippedOrigin {
		t.Errorf("default pin's origin = %q, want %q", d.Origin(), ShippedOrigin)
	}
	if p.Describe() != "debian-image linux-image-6.1.0-57-amd64=6.1.176-1 (bookworm)" {
		t.Errorf("Describe = %q", p.Describe())
	}
}

func TestPinsFileRedefinesShipped(t *testing.T) {
	resetAdded(t)
	shipped, err := Lookup(DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	// The shipped name with another package version.
	row := strings.Replace(shipped.Row, "version="+shipped.PackageVersion, "version="+shipped.PackageVersion+"+x", 1)
	f := writePins(t, imageRow+"\n\n"+row+"\n")
	err = UsePinsFile(f)
	var list PinErrors
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("UsePinsFile = %v, want one PinError", err)
	}
	want := f + ":3: pin " + DefaultPin + " redefines the shipped pin of " + PinsFile + ":"
	if !strings.HasPrefix(list[0].Error(), want) || !strings.Contains(list[0].Error(), "give this row another name") {
		t.Errorf("error = %q, want it to start %q", list[0].Error(), want)
	}
	// Nothing of a refused file is added.
	if _, err := Lookup("6.1.0-57-amd64"); !errors.Is(err, ErrUnknownPin) {
		t.Errorf("Lookup of a refused file's pin = %v, want ErrUnknownPin", err)
	}
}

func TestPinsFilesConflict(t *testing.T) {
	resetAdded(t)
	a := writePins(t, imageRow+"\n")
	b := writePins(t, strings.Replace(imageRow, "abi=2", "abi=3", 1)+"\n")
	t.Setenv(PinsEnv, a)
	if err := UsePinsFile(a); err != nil {
		t.Fatalf("the same file again: %v", err)
	}
	err := UsePinsFile(b)
	if err == nil || !strings.Contains(err.Error(), "redefines the pin of "+a+":1") {
		t.Errorf("UsePinsFile(conflicting) = %v", err)
	}
}

func TestPinsEnvErrors(t *testing.T) {
	resetAdded(t)
	t.Setenv(PinsEnv, filepath.Join(t.TempDir(), "missing.txt"))
	if _, err := AllPins(); err == nil || !strings.HasPrefix(err.Error(), PinsEnv+": pin file ") {
		t.Errorf("AllPins with a missing file = %v", err)
	}
	if _, err := Lookup(DefaultPin); err == nil {
		t.Error("Lookup succeeded although LOCKSTEP_PINS names a missing file")
	}
	resetAdded(t)
	t.Setenv(PinsEnv, writePins(t, "6.1.0-57-amd64 abi=2 source=debian-image\n"))
	if _, err := AllPins(); err == nil || !strings.Contains(err.Error(), ":1: source=debian-image pin lacks package, version, suite, sha256, inner, inner-sha256") {
		t.Errorf("AllPins with a bad row = %v", err)
	}
}

func TestImagePinNames(t *testing.T) {
	for _, name := range []string{"6.12.57+deb13-amd64", "debian-13", "6.1.0-57-amd64"} {
		row := strings.Replace(imageRow, "6.1.0-57-amd64 ", name+" ", 1)
		if _, err := ParsePins("p", []byte(row)); err != nil {
			t.Errorf("image pin named %q: %v", name, err)
		}
	}
	for _, name := range []string{"Debian", "../x", "-1"} {
		row := strings.Replace(imageRow, "6.1.0-57-amd64 ", name+" ", 1)
		if _, err := ParsePins("p", []byte(row)); err == nil || !strings.Contains(err.Error(), "is not a pin name") {
			t.Errorf("image pin named %q: %v, want a name error", name, err)
		}
	}
	// A built pin is still named by its version.
	if _, err := ParsePins("p", []byte("debian-13 abi=10 source=url url=https://x.invalid/a.tar.xz sha256="+strings.Repeat("0", 64))); err == nil {
		t.Error("a url pin named debian-13 was accepted")
	}
}
