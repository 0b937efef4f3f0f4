package kernel

import (
	"reflect"
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	base := KeyInputs{
		PinRow:   "7.2.13 abi=10 source=debian package=linux-source-7.2",
		Fragment: []byte("CONFIG_PVH=y\n"),
		Builder:  "lockstep-kernel-builder 1",
		Compiler: "gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
		Make:     "GNU Make 4.3",
		Binutils: "GNU ld (GNU Binutils for Debian) 2.40",
	}
	// The derivation is fixed: a change here invalidates every cache.
	// Computed independently: python3 -c "import hashlib,struct; …" (name + 8-byte big-endian length + value, per field).
	const golden = "7a3a294e532a2cecc3e313992de7dbb9a6d76c18d59c0d9719bc5a24af599cee"
	got := Key(base)
	if len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Fatalf("Key = %q, want 64 hex digits", got)
	}
	if got != golden {
		t.Errorf("Key(base) = %s, want %s (the derivation changed: bump BuilderVersion only on purpose)", got, golden)
	}
	if Key(base) != got {
		t.Error("Key is not deterministic")
	}
	variants := map[string]func(k *KeyInputs){
		"PinRow":     func(k *KeyInputs) { k.PinRow += " " },
		"Fragment":   func(k *KeyInputs) { k.Fragment = []byte("CONFIG_PVH=n\n") },
		"Builder":    func(k *KeyInputs) { k.Builder = "lockstep-kernel-builder 2" },
		"Compiler":   func(k *KeyInputs) { k.Compiler = "gcc (Debian 12.2.0-14+deb12u2) 12.2.0" },
		"Make":       func(k *KeyInputs) { k.Make = "GNU Make 4.4" },
		"Binutils":   func(k *KeyInputs) { k.Binutils = "GNU ld (GNU Binutils for Debian) 2.41" },
		"ShiftBytes": func(k *KeyInputs) { k.Compiler, k.Make = k.Compiler+"G", strings.TrimPrefix(k.Make, "G") },
		"EmptyFrag":  func(k *KeyInputs) { k.Fragment = nil },
	}
	seen := map[string]string{got: "base"}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			k := base
			change(&k)
			v := Key(k)
			if prev, dup := seen[v]; dup {
				t.Errorf("Key with %s changed = %s, same as %s", name, v, prev)
			}
			seen[v] = name
		})
	}
}

func TestBuilderKeyUsesToolchain(t *testing.T) {
	tc, err := toolchain()
	if err != nil {
		t.Skipf("no toolchain on this machine: %v", err)
	}
	if !strings.Contains(tc.Compiler, "gcc") || !strings.Contains(tc.Make, "Make") || !strings.Contains(tc.Binutils, "ld") {
		t.Errorf("toolchain() = %+v, want gcc, GNU Make and ld first lines", tc)
	}
	pin, _ := Lookup(DefaultPin)
	got, err := (&Builder{}).Key(pin)
	if err != nil {
		t.Fatal(err)
	}
	want := Key(KeyInputs{PinRow: pin.Row, Fragment: Fragment(), Builder: BuilderVersion, Compiler: tc.Compiler, Make: tc.Make, Binutils: tc.Binutils})
	if got != want {
		t.Errorf("Builder.Key = %s, want %s", got, want)
	}
	other, _ := (&Builder{Fragment: []byte("CONFIG_X=y\n")}).Key(pin)
	if other == got {
		t.Error("Builder.Key ignores Builder.Fragment")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := &Record{
		Key: strings.Repeat("a", 64), Pin: "7.2.13 abi=10", Version: "7.2.13", ABI: 10, Source: "debian x",
		SourceSHA256: strings.Repeat("b", 64), FragmentSHA256: strings.Repeat("c", 64), Builder: BuilderVersion,
		Compiler: "gcc: 12", Make: "GNU Make 4.3", Binutils: "GNU ld 2.40", BzImageSHA256: strings.Repeat("d", 64), BzImageSize: 2345678,
		ConfigSHA256: strings.Repeat("e", 64), KernelVersion: "7.2.13 (lockstep@lockstep) #1 SMP", Duration: "7m31s",
		BuildDuration: "7m1s", BuildCPU: "13m40s", Jobs: 2, Built: "2026-11-29T09:00:00Z",
	}
	got, err := ParseRecord(r.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("ParseRecord(Marshal(r)) = %+v, want %+v", got, r)
	}
}

func TestParseRecordRefuses(t *testing.T) {
	good := string((&Record{Key: "k", Pin: "p", Version: "v", BzImageSHA256: "b", ConfigSHA256: "c"}).Marshal())
	tests := []struct{ Name, Src, Want string }{
		{"NoMagic", "key: x\n", "line 1"},
		{"UnknownKey", good + "colour: red\n", `unknown key "colour"`},
		{"NoBzImageHash", strings.Replace(good, "bzimage-sha256: b\n", "", 1), "missing bzimage-sha256"},
		{"EmptyConfigHash", strings.Replace(good, "config-sha256: c", "config-sha256: ", 1), "missing config-sha256"},
		{"BadNumber", strings.Replace(good, "abi: 0", "abi: x", 1), `abi "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			r, err := ParseRecord([]byte(tt.Src))
			if err == nil || r != nil || !strings.Contains(err.Error(), tt.Want) {
				t.Errorf("ParseRecord = %v, %v; want error containing %q", r, err, tt.Want)
			}
		})
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add((&Record{Key: "k", Pin: "p", Version: "v", BzImageSHA256: "b", ConfigSHA256: "c"}).Marshal())
	f.Add([]byte(recordMagic + "\nkey:\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := ParseRecord(src)
		if err != nil {
			if r != nil {
				t.Fatal("record with error")
			}
			return
		}
		if r.Key == "" || r.BzImageSHA256 == "" || r.ConfigSHA256 == "" {
			t.Fatalf("accepted record without hashes: %+v", r)
		}
	})
}
