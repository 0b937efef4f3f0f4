package kernel

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBzImage is a bzImage as far as verification reads one: the boot flag,
// the setup header magic, and the version string its header points to,
// followed by payload.
func fakeBzImage(version, payload string) []byte {
	b := make([]byte, 0x400)
	binary.LittleEndian.PutUint16(b[bootFlagOffset:], 0xAA55)
	copy(b[headerMagicOffset:], "HdrS")
	binary.LittleEndian.PutUint16(b[kernelVersionOffset:], 0x100)
	copy(b[setupHeaderBase+0x100:], version+" (lockstep@lockstep) #1 SMP "+BuildTimestamp+"\x00")
	return append(b, payload...)
}

// writeFakeEntry writes a self-consistent cache entry for pin under
// cache/key: the bzImage img, a config holding the required options, and a
// build.txt naming both files' SHA-256, as whoever writes the cache can.
func writeFakeEntry(t *testing.T, cache, key string, pin Pin, frag, img []byte) string {
	t.Helper()
	dir := filepath.Join(cache, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := []byte(strings.Join(RequiredOptions(frag), "\n") + "\n")
	rec := &Record{Key: key, Pin: pin.Row, Version: pin.Version, ABI: pin.ABI, BzImageSHA256: sha256Hex(img), ConfigSHA256: sha256Hex(cfg)}
	write(t, filepath.Join(dir, BzImageName), img)
	write(t, filepath.Join(dir, ConfigName), cfg)
	write(t, filepath.Join(dir, RecordName), rec.Marshal())
	return dir
}

// recordedFixture is a temporary cache holding a genuine-looking entry of
// DefaultPin under the key this machine computes, and a table row that
// records that entry's bzImage.
func recordedFixture(t *testing.T) (b *Builder, pin Pin, key string, genuine []byte) {
	t.Helper()
	if _, err := toolchain(); err != nil {
		t.Skipf("cannot compute cache keys here: %v", err)
	}
	frag := []byte("CONFIG_PVH=y\nCONFIG_SECURITY_LANDLOCK=y\n")
	b = &Builder{CacheDir: t.TempDir(), Fragment: frag}
	pin, err := b.Lookup(DefaultPin)
	if err != nil {
		t.Fatal(err)
	}
	if key, err = b.Key(pin); err != nil {
		t.Fatal(err)
	}
	genuine = fakeBzImage(pin.Version, "the kernel the repository recorded")
	writeFakeEntry(t, b.CacheDir, key, pin, frag, genuine)
	tc, _ := toolchain()
	b.Recorded = []RecordedImage{{Version: pin.Version, Compiler: tc.Compiler, Make: tc.Make, Binutils: tc.Binutils,
		Key: key, BzImageSHA256: sha256Hex(genuine), File: "test-table", Line: 7}}
	return b, pin, key, genuine
}

// TestRecordedRefusesRewrittenEntry: a cache entry whose bzImage was replaced
// and whose build.txt was rewritten to match is refused when its key has a
// row, by Verify, Build and List alike; build.txt's agreement counts for
// nothing. Before the table, this entry verified.
func TestRecordedRefusesRewrittenEntry(t *testing.T) {
	b, pin, key, genuine := recordedFixture(t)
	r, err := b.Verify(t.Context(), DefaultPin)
	if err != nil || r.Recorded == nil || r.Recorded.Where() != "test-table:7" || r.NewRow != nil {
		t.Fatalf("Verify(genuine entry) = %+v, %v; want it verified against test-table:7", r, err)
	}
	evil := fakeBzImage(pin.Version, "a kernel someone else put in the cache")
	writeFakeEntry(t, b.CacheDir, key, pin, b.Fragment, evil)
	want := "bzImage sha256 is " + sha256Hex(evil) + ", test-table:7 records " + sha256Hex(genuine)
	for name, call := range map[string]func() (*Result, error){
		"Verify": func() (*Result, error) { return b.Verify(t.Context(), DefaultPin) },
		"Build":  func() (*Result, error) { return b.Build(t.Context(), DefaultPin) },
	} {
		r, err := call()
		var ve *VerifyError
		if r != nil || !errors.As(err, &ve) || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s(rewritten entry) = %+v, %v\nwant ErrRefused containing %q", name, r, err, want)
			continue
		}
		if len(ve.Failures) != 1 {
			t.Errorf("%s failures = %q, want only the table's (build.txt was rewritten to agree)", name, ve.Failures)
		}
	}
	es, err := b.List(t.Context())
	if err != nil || es[0].Pin == nil || es[0].Pin.Version != DefaultPin || !strings.HasPrefix(es[0].State, "refused: "+want) {
		t.Errorf("List()[0] = %+v, %v; want %s refused: %s", es[0], err, DefaultPin, want)
	}
	if _, err := os.Stat(filepath.Join(b.CacheDir, key, BzImageName)); err != nil {
		t.Errorf("the refused entry was removed or rebuilt: %v", err)
	}
}

// TestUnrecordedReported: an entry whose key has no row verifies on
// build.txt's word and says so, with the row that would record it.
func TestUnrecordedReported(t *testing.T) {
	b, pin, key, genuine := recordedFixture(t)
	b.Recorded = []RecordedImage{} // empty, not nil: no embedded table either
	r, err := b.Verify(t.Context(), DefaultPin)
	if err != nil {
		t.Fatalf("Verify(unrecorded entry) = %v, want it accepted", err)
	}
	tc, _ := toolchain()
	wantRow := RecordedImage{Version: pin.Version, Compiler: tc.Compiler, Make: tc.Make, Binutils: tc.Binutils, Key: key, BzImageSHA256: sha256Hex(genuine)}
	if r.Recorded != nil || r.NewRow == nil || *r.NewRow != wantRow {
		t.Errorf("Verify(unrecorded) Recorded = %v, NewRow = %+v; want nil and %+v", r.Recorded, r.NewRow, wantRow)
	}
	es, err := b.List(t.Context())
	if err != nil || es[0].State != "verified (unrecorded)" {
		t.Errorf("List()[0].State = %q, %v; want \"verified (unrecorded)\"", es[0].State, err)
	}
	// A row for another key leaves this one unrecorded.
	other := wantRow
	other.Key = strings.Repeat("0", 64)
	b.Recorded = []RecordedImage{other}
	if r, err := b.Verify(t.Context(), DefaultPin); err != nil || r.Recorded != nil {
		t.Errorf("Verify with only another key's row = %+v, %v; want unrecorded", r, err)
	}
}

// TestVerifyImageUsesTable: a bzImage handed in by path is matched to a row
// by the key its build.txt names.
func TestVerifyImageUsesTable(t *testing.T) {
	b, pin, key, _ := recordedFixture(t)
	evil := fakeBzImage(pin.Version, "swapped")
	dir := writeFakeEntry(t, b.CacheDir, key, pin, b.Fragment, evil)
	_, err := verifyDir(dir, pin, "", RequiredOptions(b.Fragment), b.Recorded)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "test-table:7 records") {
		t.Errorf("verifyDir(key \"\") = %v, want the row picked by build.txt's key to refuse it", err)
	}
}

// TestRecordedKeys: every embedded row's key is the key of its version's pin
// row and fragment, the current BuilderVersion and its toolchain, so no row
// outlives a change of what it recorded.
func TestRecordedKeys(t *testing.T) {
	for _, r := range RecordedImages() {
		pin, err := Lookup(r.Version)
		if err != nil {
			t.Errorf("%s: %v", r.Where(), err)
			continue
		}
		frag, err := FragmentFor(pin.Version, Fragment())
		if err != nil {
			t.Fatal(err)
		}
		got := Key(KeyInputs{PinRow: pin.Row, Fragment: frag, Builder: BuilderVersion, Compiler: r.Compiler, Make: r.Make, Binutils: r.Binutils})
		if got != r.Key {
			t.Errorf("%s: key %s, but pin %s, its fragment, %s and the row's toolchain give %s: the pin, fragment or builder changed since; build twice and record again, or drop the row",
				r.Where(), r.Key, r.Version, BuilderVersion, got)
		}
	}
}

func TestParseRecordedImages(t *testing.T) {
	h := strings.Repeat("a", 64)
	good := "7.2.13 | gcc (Debian 12.2.0-14+deb12u1) 12.2.0 | GNU Make 4.3 | GNU ld (GNU Binutils for Debian) 2.40 | " + h + " | " + strings.Repeat("b", 64)
	rows, err := ParseRecordedImages("t.txt", []byte("# comment\n\n"+good+"\n"))
	if err != nil || len(rows) != 1 || rows[0].Line != 3 || rows[0].Compiler != "gcc (Debian 12.2.0-14+deb12u1) 12.2.0" || rows[0].Row() != good {
		t.Fatalf("ParseRecordedImages(good) = %+v, %v", rows, err)
	}
	for _, tc := range []struct{ Name, Src, Want string }{
		{"FiveFields", "7.2.13 | gcc | make | ld | " + h, "t.txt:1: 5 fields, want 6"},
		{"BadVersion", "7.x | gcc | make | ld | " + h + " | " + h, `version "7.x"`},
		{"EmptyCompiler", "7.2.13 |  | make | ld | " + h + " | " + h, "compiler is empty"},
		{"ShortKey", "7.2.13 | gcc | make | ld | abc | " + h, `key "abc", want 64`},
		{"UpperHash", "7.2.13 | gcc | make | ld | " + h + " | " + strings.ToUpper(h), "bzimage-sha256"},
		{"DuplicateKey", good + "\n" + good, "t.txt:2: key " + h + " already recorded on line 1"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			rows, err := ParseRecordedImages("t.txt", []byte(tc.Src))
			if rows != nil || err == nil || !strings.Contains(err.Error(), tc.Want) {
				t.Errorf("ParseRecordedImages = %v, %v; want an error containing %q", rows, err, tc.Want)
			}
		})
	}
}

func FuzzParseRecordedImages(f *testing.F) {
	f.Add(bzImagesTxt)
	f.Add([]byte("7.2.13 | gcc | make | ld | " + strings.Repeat("a", 64) + " | " + strings.Repeat("b", 64) + "\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		rows, err := ParseRecordedImages("f", src)
		if err != nil {
			if rows != nil {
				t.Fatal("rows with an error")
			}
			return
		}
		// What parses renders to rows that parse back to the same values.
		var b strings.Builder
		for _, r := range rows {
			b.WriteString(r.Row() + "\n")
		}
		again, err := ParseRecordedImages("f", []byte(b.String()))
		if err != nil || len(again) != len(rows) {
			t.Fatalf("re-parse of %q = %v, %v", b.String(), again, err)
		}
		for i := range rows {
			a, z := rows[i], again[i]
			a.File, a.Line, z.File, z.Line = "", 0, "", 0
			if a != z {
				t.Fatalf("row %d: %+v re-parsed as %+v", i, a, z)
			}
		}
	})
}
